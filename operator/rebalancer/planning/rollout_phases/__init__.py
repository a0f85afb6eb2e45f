"""The rollout planner's rules, a module per phase or group of phases of the state machine
(planning.rollout_states); planning.rollouts steps through them.

- common: the Observation, and what every phase's rule uses (the step's state, its helpers);
- resting: Idle and Completed, where a rollout starts (writers: another writer's partition);
- planning: Planning, and the start of each batch;
- opening: BatchOpening, by mechanism (gate queue, StatefulSet replace, Deployment/scale steps);
- joining: BatchJoining; settling: BatchSettling;
- stopped: Paused, Failed, and rollouts not managed.

Each phase is a class that inherits the phases whose rules it calls (BatchJoining keeps
releasing strays as BatchOpening does, and sees the batch settle; BatchSettling begins the next
batch as Planning does), so every call is typed; planning.rollouts._Step joins them all.
"""
