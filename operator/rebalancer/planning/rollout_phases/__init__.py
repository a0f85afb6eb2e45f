"""The rollout planner's rules, a module per phase or group of phases of the state machine
(planning.rollout_states); planning.rollouts steps through them.

- transitions: the table, phase -> rule, and `advance`, which applies it;
- common: the Observation, and helpers every rule uses, plain functions of the state;
- resting: Idle and Completed, where a rollout starts (writers: another writer's partition);
- planning: Planning, and the start of each batch;
- opening: BatchOpening, by mechanism (gate queue, StatefulSet replace, Deployment/scale steps);
- joining: BatchJoining; settling: BatchSettling;
- stopped: Paused, Failed, and rollouts not managed.

Every rule is a function (state, observation, now) -> (state, actions): it reads the state it
is given and returns the next, so what a rule calls (joining's keep_released, settling's
begin_batch) sees exactly the state passed to it, never one held on an object.
"""
