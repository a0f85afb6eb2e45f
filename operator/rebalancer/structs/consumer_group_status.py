"""The ConsumerGroup status as a typed model, for its schema in the CRD (`make crd`).

The operator writes the status as patches of plain mappings; these classes are the one place its
fields, types and descriptions are defined, so that the CRD (and `kubectl explain`) says what the
operator writes, and every patch is checked against them before it is sent
(structs/status_patches.py). Every field is optional: a status is filled in as the operator learns.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema

from rebalancer.structs.spec_models import Bool, Int, Number, SpecModel, Str


class StatusModel(SpecModel):
    """A block of the status: camelCase on the wire, written by the operator alone."""


class ConditionEntry(StatusModel):
    """One condition, as in Kubernetes API conventions."""

    type: Annotated[Str, Field(description="Ready, Progressing or Degraded.")]
    status: Annotated[
        Literal["True", "False", "Unknown"], Field(description="True, False or Unknown.")
    ]
    reason: Annotated[Str | None, Field(description="One CamelCase word that says why.")] = None
    message: Annotated[Str | None, Field(description="What happened and what to do, in words.")] = (
        None
    )
    last_transition_time: Annotated[
        Str | None,
        Field(
            description="When the status last changed.", json_schema_extra={"format": "date-time"}
        ),
    ] = None
    observed_generation: Annotated[
        Int | None,
        Field(
            description="The metadata.generation this condition was set for.",
            json_schema_extra={"format": "int64"},
        ),
    ] = None


class RolloutProgressStatus(StatusModel):
    """The rollout in progress or last finished, written by the operator. It is the planner's whole
    state: a restarted operator carries on from here without repeating or skipping a batch.
    """

    phase: Annotated[
        Literal[
            "Idle",
            "Planning",
            "BatchOpening",
            "BatchJoining",
            "BatchSettling",
            "Completed",
            "Failed",
            "Paused",
        ]
        | None,
        Field(
            description=(
                "Idle, Planning, BatchOpening (gathering the batch's pods), BatchJoining "
                "(released, waiting for the group to settle), BatchSettling, Completed, Failed or"
                " Paused."
            )
        ),
    ] = None
    kind: Annotated[Str | None, Field(description="cold-start, scale-up or rolling-update.")] = None
    mechanism: Annotated[
        Str | None,
        Field(
            description=(
                "How batches are released: gate-queue, statefulset-replace, deployment-steps or "
                "scale-steps."
            )
        ),
    ] = None
    batch: Annotated[Int | None, Field(description="The current batch, from 1.")] = None
    batches: Annotated[Int | None, Field(description="How many batches the rollout has.")] = None
    batch_sizes: Annotated[list[Int] | None, Field(description="Pods in each batch.")] = None
    members_joined: Annotated[
        Int | None, Field(description="Pods of settled batches, now members of the group.")
    ] = None
    rebalances: Annotated[
        Int | None,
        Field(
            description="Rebalances observed since the rollout started.",
            json_schema_extra={"format": "int64"},
        ),
    ] = None
    started_at: Annotated[
        Str | None,
        Field(description="When the rollout started.", json_schema_extra={"format": "date-time"}),
    ] = None
    message: Annotated[
        Str | None, Field(description="What is happening or what went wrong, and how to go on.")
    ] = None
    reason: Annotated[
        Str | None,
        Field(
            description=(
                "Why the rollout failed (BatchDidNotSettle, BatchNotReleased, PolicyCannotBeMet, "
                "WorkloadNotFound)."
            )
        ),
    ] = None
    opened: Annotated[
        list[Str] | None, Field(description="Pods released in the current batch.")
    ] = None
    slots: Annotated[
        list[Str] | None,
        Field(
            description=(
                "Identity slots this rollout gave, as pod=slot (a Deployment whose consumers take"
                " group.instance.id from the pod's rebalancer.dev/instance-id annotation)."
            )
        ),
    ] = None
    rollout_id: Annotated[
        Str | None,
        Field(description="Names this rollout in the pods' rebalancer.dev/gate-batch annotations."),
    ] = None
    target: Annotated[
        Str | None,
        Field(
            description=(
                "What the rollout brings the workload to (revision@replicas and its rollout "
                "settings)."
            )
        ),
    ] = None
    spec_generation: Annotated[
        Int | None,
        Field(
            description="The ConsumerGroup generation the rollout was planned for.",
            json_schema_extra={"format": "int64"},
        ),
    ] = None
    static: Annotated[
        Bool | None,
        Field(description="Whether the members were treated as static (group.instance.id)."),
    ] = None
    ordinals: Annotated[
        Str | None,
        Field(
            description=(
                "StatefulSet ordinals to replace, highest first, as ranges (for example 11-8,5)."
            )
        ),
    ] = None
    base: Annotated[
        Int | None,
        Field(
            description=(
                "Updated pods (Deployment steps) or replicas (scale steps) when the rollout "
                "started."
            )
        ),
    ] = None
    target_replicas: Annotated[
        Int | None, Field(description="The replicas the rollout brings the workload to.")
    ] = None
    rebalances_at_start: Annotated[
        Int | None,
        Field(
            description="The group's rebalance count when the rollout started.",
            json_schema_extra={"format": "int64"},
        ),
    ] = None
    generation_at_open: Annotated[
        Int | None,
        Field(
            description="The group generation when the current batch was released.",
            json_schema_extra={"format": "int64"},
        ),
    ] = None
    phase_since: Annotated[
        Str | None,
        Field(
            description="When the current phase began.", json_schema_extra={"format": "date-time"}
        ),
    ] = None
    opened_at: Annotated[
        Str | None,
        Field(
            description="When the current batch was released.",
            json_schema_extra={"format": "date-time"},
        ),
    ] = None
    gather_until: Annotated[
        Str | None,
        Field(
            description=(
                "When the current batch opens with whichever pods have reached their gates."
            ),
            json_schema_extra={"format": "date-time"},
        ),
    ] = None
    deadline: Annotated[
        Str | None,
        Field(
            description="When the current batch fails if not released or settled.",
            json_schema_extra={"format": "date-time"},
        ),
    ] = None
    settle_until: Annotated[
        Str | None,
        Field(
            description="When the settled batch may be followed by the next.",
            json_schema_extra={"format": "date-time"},
        ),
    ] = None
    paused_from: Annotated[
        Str | None, Field(description="The phase a paused rollout goes back to.")
    ] = None
    paused_at: Annotated[
        Str | None,
        Field(
            description="When the rollout was paused.", json_schema_extra={"format": "date-time"}
        ),
    ] = None
    seen_at: Annotated[
        Str | None,
        Field(
            description=(
                "When the operator last stepped this rollout (gaps longer than 90 s do not count "
                "against timers)."
            ),
            json_schema_extra={"format": "date-time"},
        ),
    ] = None
    holding_deployment: Annotated[
        Bool | None, Field(description="The operator paused the Deployment and will resume it.")
    ] = None
    parked: Annotated[
        Bool | None,
        Field(description="The operator parked the StatefulSet's partition at its replicas."),
    ] = None
    steady_replicas: Annotated[
        Int | None, Field(description="The workload's replicas when no rollout was running.")
    ] = None
    resume_token: Annotated[
        Str | None,
        Field(description="The rebalancer.dev/resume-rollout annotation when the rollout failed."),
    ] = None
    completed_revision: Annotated[
        Str | None,
        Field(
            description=(
                "Identifies the last finished rollout, for the afterRollout enforcement trigger."
            )
        ),
    ] = None
    contested_by: Annotated[
        Str | None,
        Field(
            description=(
                "The field manager that moved the StatefulSet's partition during this rollout; "
                "the operator set it back once."
            )
        ),
    ] = None
    yielded: Annotated[
        Bool | None,
        Field(
            description=(
                "That field manager moved the partition again: the operator leaves the partition "
                "to it for the rest of the rollout and does not park it afterwards, until no "
                "field manager but the operator's owns the partition (PartitionTakenBack Event; "
                "docs/gitops.md)."
            )
        ),
    ] = None
    autoscaler: Annotated[
        Str | None,
        Field(
            description=(
                "The KEDA ScaledObject or HorizontalPodAutoscaler that targets the workload and "
                "what rollouts do about it (KEDA is paused during each rollout; an HPA's quick "
                "steps are gathered into one wave). docs/autoscalers.md."
            )
        ),
    ] = None
    interference: Annotated[
        Str | None,
        Field(
            description=(
                "What other writers did to the workload during this rollout (a partition moved, a"
                " new template or other replicas that superseded the last rollout)."
            )
        ),
    ] = None
    plan: Annotated[
        Str | None,
        Field(
            description=(
                "The arrival plan of a cold start or scale-up (OnArrival, Gather or OpenAhead), "
                "the cheapest on the coordinator model unless spec.policy.rollout.arrivalPlan "
                "names one."
            )
        ),
    ] = None
    plan_cost: Annotated[
        Int | None,
        Field(
            description=(
                "The chosen plan's predicted cost (weighted partition-seconds, "
                "spec.policy.rollout.costWeights)."
            ),
            json_schema_extra={"format": "int64"},
        ),
    ] = None
    runner_up: Annotated[Str | None, Field(description="The next cheapest plan.")] = None
    runner_up_cost: Annotated[
        Int | None,
        Field(description="The runner-up's predicted cost.", json_schema_extra={"format": "int64"}),
    ] = None
    plan_reason: Annotated[
        Str | None,
        Field(
            description=(
                "Why the plan was chosen: each plan's predicted unowned and stop-the-world "
                "partition-seconds, rebalances and time to Stable, and what the model assumed."
            )
        ),
    ] = None


class GroupConfigsStatus(StatusModel):
    """KIP-848 per-group configs and what became of them."""

    values: Annotated[
        dict[str, Str] | None,
        Field(
            description=(
                "The group configs rendered (consumer.session.timeout.ms, ...) and their values."
            )
        ),
    ] = None
    state: Annotated[
        Str | None,
        Field(description="applied, accepted-not-verifiable, failed, pending or not-needed."),
    ] = None
    message: Annotated[
        Str | None,
        Field(
            description=("What the broker answered to the group configs, or why they are pending.")
        ),
    ] = None


class GroupConfigValueStatus(StatusModel):
    """One per-group config as the broker reads it back."""

    value: Annotated[Str | None, Field(description="The value the broker reads back.")] = None
    source: Annotated[
        Str | None,
        Field(
            description=("Where the broker says it comes from (group-config is the group's own).")
        ),
    ] = None


class PerGroupConfigsStatus(StatusModel):
    """spec.policy.groupConfigs as the broker reads them back, and what became of them."""

    state: Annotated[
        Str | None,
        Field(
            description=(
                "applied, accepted-not-verifiable, failed, refused (outside the broker's bounds, "
                "nothing sent) or not-needed."
            )
        ),
    ] = None
    message: Annotated[
        Str | None,
        Field(
            description=("The configs in force, or what is wrong, naming the field and the fix.")
        ),
    ] = None
    configs: Annotated[
        dict[str, GroupConfigValueStatus] | None,
        Field(
            description=(
                "Each config set, as DescribeConfigs reads it back, with its source "
                "(group-config, default-config)."
            )
        ),
    ] = None


class SessionLimitsStatus(StatusModel):
    """The broker's session limits the settings were checked against."""

    min_session_timeout_ms: Annotated[
        Int | None,
        Field(
            description=(
                "The broker's lowest session timeout (group.min.session.timeout.ms, or its "
                "KIP-848 counterpart)."
            )
        ),
    ] = None
    max_session_timeout_ms: Annotated[
        Int | None,
        Field(
            description=(
                "The broker's highest session timeout (group.max.session.timeout.ms, or its "
                "KIP-848 counterpart)."
            )
        ),
    ] = None
    source: Annotated[
        Str | None, Field(description="broker, partly, or default (the broker reports no configs).")
    ] = None
    message: Annotated[
        Str | None,
        Field(
            description=(
                "Set when the broker refused to describe its configs (the operator's Kafka user "
                "lacks DescribeConfigs on the cluster): what to grant; the settings were then "
                "checked against Kafka's defaults."
            )
        ),
    ] = None


class BrokerDelayOutcomeStatus(StatusModel):
    """The cluster's initial rebalance delay and this group's part in it."""

    cluster: Annotated[
        Str | None,
        Field(description="id:<Kafka cluster id>, or bootstrap:<servers> before the id is known."),
    ] = None
    wanted_ms: Annotated[
        Int | None,
        Field(description="The delay this group asks for (spec.policy.brokerDelay.delayMs)."),
    ] = None
    cluster_ms: Annotated[
        Int | None, Field(description="The value chosen for the cluster by the rule.")
    ] = None
    mode: Annotated[
        Str | None,
        Field(
            description=(
                "spec.policy.brokerDelay.mode as reconciled (recommend, strimzi or alter-configs)."
            )
        ),
    ] = None
    action: Annotated[
        Str | None, Field(description="none, recommend, patch-strimzi or alter-broker.")
    ] = None
    rule: Annotated[
        Str | None,
        Field(description="How the cluster's value is chosen from its ConsumerGroups, in words."),
    ] = None
    decided_by: Annotated[
        Str | None,
        Field(description="The ConsumerGroup (namespace/name) whose delayMs is the largest."),
    ] = None
    capped_by: Annotated[
        Str | None,
        Field(description="The ConsumerGroup whose maxDelayMs capped the value, if any."),
    ] = None
    reason: Annotated[
        Str | None,
        Field(
            description=(
                "One CamelCase word for the action chosen or why none was (DelayRefused, ...)."
            )
        ),
    ] = None
    message: Annotated[
        Str | None,
        Field(description="What the operator did or recommends about the delay, and how to go on."),
    ] = None
    outcome: Annotated[
        Str | None,
        Field(
            description=(
                "What carrying out the action gave (applied, accepted-not-verifiable, ...)."
            )
        ),
    ] = None
    in_force_ms: Annotated[
        Int | None,
        Field(
            description=("The value the broker reports now (DescribeConfigs), when it reports one.")
        ),
    ] = None
    in_force_source: Annotated[
        Str | None,
        Field(
            description=(
                "Where the broker says that value comes from: static-broker-config "
                "(server.properties, read-only on Apache Kafka: changing it takes a rolling "
                "restart), dynamic-broker-config, dynamic-default-broker-config or "
                "default-config."
            )
        ),
    ] = None


class InjectedSidecarStatus(StatusModel):
    """The enforcement sidecar the operator adds to the pod template
    (spec.policy.enforce.sidecar.inject).
    """

    inject: Annotated[
        Bool | None, Field(description="What spec.policy.enforce.sidecar.inject asked for.")
    ] = None
    injected: Annotated[
        Bool | None,
        Field(description="The pod template carries the operator's sidecar as last rendered."),
    ] = None
    hash: Annotated[
        Str | None,
        Field(
            description=(
                "Hash of the rendered sidecar; the pod template carries it in the "
                "rebalancer.dev/sidecar-hash annotation."
            )
        ),
    ] = None
    container: Annotated[
        Str | None, Field(description="Name of the sidecar container in the pod template.")
    ] = None
    rolled_out: Annotated[
        Bool | None,
        Field(
            description=(
                "Every live pod runs the template that carries the sidecar (or, with inject off, "
                "no longer carries it)."
            )
        ),
    ] = None
    reason: Annotated[
        Str | None,
        Field(
            description=(
                "SidecarInjected, SidecarRemoved, SidecarRefused or PatternTakesControlTopics."
            )
        ),
    ] = None
    message: Annotated[
        Str | None,
        Field(
            description=("What the operator did, or why it refused, naming the field and its fix.")
        ),
    ] = None


class DeliveredSettingsStatus(StatusModel):
    """The consumer settings, the injected sidecar and the broker delay as last reconciled."""

    protocol: Annotated[
        Str | None,
        Field(description="Group protocol the settings were rendered for (classic or consumer)."),
    ] = None
    client_library: Annotated[
        Str | None, Field(description="Client library assumed (java or librdkafka).")
    ] = None
    hash: Annotated[
        Str | None,
        Field(
            description=(
                "Hash of the rendered settings, also the pod template's "
                "rebalancer.dev/settings-hash."
            )
        ),
    ] = None
    config_map: Annotated[
        Str | None, Field(description="Name of the ConfigMap holding consumer.properties.")
    ] = None
    applied: Annotated[
        Bool | None, Field(description="The workload's pod template carries these settings.")
    ] = None
    rolled_out: Annotated[
        Bool | None, Field(description="Every pod runs the pod template with these settings.")
    ] = None
    session_timeout_ms: Annotated[
        Int | None,
        Field(description="Session timeout delivered (client property or group config)."),
    ] = None
    heartbeat_interval_ms: Annotated[
        Int | None, Field(description="Heartbeat interval delivered.")
    ] = None
    max_poll_interval_ms: Annotated[
        Int | None,
        Field(
            description=(
                "max.poll.interval.ms delivered (the rebalance timeout of classic groups)."
            )
        ),
    ] = None
    assignors: Annotated[
        list[Str] | None,
        Field(
            description=("partition.assignment.strategy rendered, as short names (classic groups).")
        ),
    ] = None
    migration_step: Annotated[
        Int | None,
        Field(description="0, or 1 / 2 during KIP-429's two-rollout move to cooperative-sticky."),
    ] = None
    group_configs: GroupConfigsStatus | None = None
    per_group_configs: PerGroupConfigsStatus | None = None
    session_limits: SessionLimitsStatus | None = None
    broker_delay: BrokerDelayOutcomeStatus | None = None
    notes: Annotated[
        list[Str] | None,
        Field(
            description=(
                "How the settings were rendered, in words (KIP-848 group configs, the assignor "
                "migration step, static membership, ...)."
            )
        ),
    ] = None
    message: Annotated[
        Str | None,
        Field(description="Why the settings were refused, naming each field and its fix."),
    ] = None
    sidecar: InjectedSidecarStatus | None = None


class RecommendedStatus(StatusModel):
    """The bounded recommendation."""

    initial_rebalance_delay_ms: Annotated[
        Number | None,
        Field(
            description="Recommended group.initial.rebalance.delay.ms.",
            json_schema_extra={"nullable": True},
        ),
    ] = None
    batch_size: Annotated[
        Int | None,
        Field(description="Recommended rollout batch size.", json_schema_extra={"nullable": True}),
    ] = None
    session_timeout_ms: Annotated[
        Number | None,
        Field(description="Recommended session.timeout.ms.", json_schema_extra={"nullable": True}),
    ] = None


class LearningOutcomeStatus(StatusModel):
    """The latest recommendation of the learning job and what the operator did with it."""

    action: Annotated[Str | None, Field(description="none, show or apply.")] = None
    reason: Annotated[
        Str | None,
        Field(
            description=(
                "LearningOff, NoRecommendation, Recommended, RecommendationStale, InEffect, "
                "NoGain, WaitingForInterval, Applying or NothingToApply (auto mode found none of "
                "its policy blocks turned on)."
            )
        ),
    ] = None
    message: Annotated[
        Str | None, Field(description="What was recommended and why it was or was not applied.")
    ] = None
    run_id: Annotated[
        Str | None, Field(description="The learning run the recommendation came from.")
    ] = None
    generated_at: Annotated[
        Str | None,
        Field(
            description="When the recommendation was computed.",
            json_schema_extra={"format": "date-time"},
        ),
    ] = None
    expected_improvement: Annotated[
        Number | None,
        Field(
            description=(
                "Expected saving (time to Stable plus stop-the-world) against the settings in "
                "force, as a fraction."
            )
        ),
    ] = None
    recommended: RecommendedStatus | None = None
    clamped: Annotated[list[Str] | None, Field(description="Settings the bounds changed.")] = None
    last_applied_time: Annotated[
        Str | None,
        Field(
            description="When a recommendation was last applied.",
            json_schema_extra={"nullable": True, "format": "date-time"},
        ),
    ] = None


class EnforcementRecordStatus(StatusModel):
    """The last enforced rebalance and what the triggers remember."""

    last_request_id: Annotated[
        Str | None,
        Field(description="Id of the last enforcement request (sidecars de-duplicate by it)."),
    ] = None
    last_cause: Annotated[
        Str | None,
        Field(
            description=("What triggered it (on-demand, schedule, topic-creation, after-rollout).")
        ),
    ] = None
    last_time: Annotated[
        Str | None,
        Field(description="When it was requested.", json_schema_extra={"format": "date-time"}),
    ] = None
    last_status: Annotated[
        Str | None,
        Field(description="enforced, in-progress, skipped-in-progress, failed, or unsupported."),
    ] = None
    message: Annotated[
        Str | None,
        Field(
            description=(
                "Why the last request was not enforced (unsupported, failed), in the sidecar's "
                "words."
            )
        ),
    ] = None
    last_generation: Annotated[
        Int | None,
        Field(
            description="Generation the enforcement produced, when known.",
            json_schema_extra={"format": "int64"},
        ),
    ] = None
    memory: Annotated[
        dict[str, Any] | None,
        WithJsonSchema(
            {
                "type": "object",
                "description": (
                    "Trigger state kept so a restarted operator neither repeats nor skips a "
                    "trigger."
                ),
                "x-kubernetes-preserve-unknown-fields": True,
            }
        ),
    ] = None


class MemberDetailStatus(StatusModel):
    """One member."""

    host: Annotated[Str | None, Field(description="Pod name or host of the member.")] = None
    member_id: Annotated[Str | None, Field(description="Member id given by the coordinator.")] = (
        None
    )
    instance_id: Annotated[
        Str | None, Field(description="group.instance.id, for static members.")
    ] = None
    generation: Annotated[
        Int | None,
        Field(
            description="Generation the member last reported.",
            json_schema_extra={"format": "int64"},
        ),
    ] = None
    partitions: Annotated[Int | None, Field(description="Partitions the member owns.")] = None
    target_partitions: Annotated[
        Int | None,
        Field(
            description=(
                "KIP-848 groups only, partitions the coordinator's target assignment gives the "
                "member."
            )
        ),
    ] = None
    process_id: Annotated[
        Str | None,
        Field(description="Streams groups only, the Kafka Streams client the member is part of."),
    ] = None
    active_tasks: Annotated[
        Int | None, Field(description="Streams groups only, active tasks the member holds.")
    ] = None
    standby_tasks: Annotated[
        Int | None, Field(description="Streams groups only, standby tasks the member holds.")
    ] = None
    warmup_tasks: Annotated[
        Int | None,
        Field(
            description=(
                "Streams groups only, warm-up tasks the member holds (KIP-441: standbys "
                "catching up before they take the task over)."
            )
        ),
    ] = None
    target_active_tasks: Annotated[
        Int | None,
        Field(
            description=(
                "Streams groups only, active tasks the coordinator's target assignment gives "
                "the member."
            )
        ),
    ] = None
    source: Annotated[Str | None, Field(description="broker or member-reports.")] = None


class ObservedGroupStatus(StatusModel):
    """The group as last observed."""

    state: Annotated[
        Str | None,
        Field(
            description=(
                "Group state (Stable, PreparingRebalance, CompletingRebalance, Empty, Dead, "
                "Unknown; KIP-848 and streams groups: Assigning, Reconciling; streams groups: "
                "NotReady)."
            )
        ),
    ] = None
    protocol: Annotated[
        Str | None,
        Field(description="Group protocol in use (classic, consumer or streams)."),
    ] = None
    assignor: Annotated[
        Str | None, Field(description="Partition assignment strategy the members use.")
    ] = None
    generation: Annotated[
        Int | None, Field(description="Group generation.", json_schema_extra={"format": "int64"})
    ] = None
    members: Annotated[Int | None, Field(description="Number of members.")] = None
    assigned_partitions: Annotated[
        Int | None, Field(description="Partitions assigned to some member.")
    ] = None
    total_partitions: Annotated[
        Int | None, Field(description="Partitions of the subscribed topics.")
    ] = None
    lag: Annotated[
        Int | None,
        Field(
            description="Total consumer lag in messages, when known.",
            json_schema_extra={"format": "int64"},
        ),
    ] = None
    rebalances: Annotated[
        Int | None,
        Field(
            description="Rebalances recorded since this resource was created.",
            json_schema_extra={"format": "int64"},
        ),
    ] = None
    last_rebalance_time: Annotated[
        Str | None,
        Field(
            description="When the latest rebalance was detected.",
            json_schema_extra={"format": "date-time"},
        ),
    ] = None
    last_rebalance_cause: Annotated[
        Str | None, Field(description="Why the latest rebalance happened, as far as it is known.")
    ] = None
    observed_at: Annotated[
        Str | None,
        Field(
            description="When the group was last observed.",
            json_schema_extra={"format": "date-time"},
        ),
    ] = None
    broker_profile: Annotated[
        Str | None, Field(description="Broker implementation in use (apache-kafka, redpanda).")
    ] = None
    coordinator: Annotated[
        Int | None,
        Field(
            description=(
                "Node id of the broker that coordinated the group when last described; a "
                "CoordinatorMoved Event tells when it changes."
            )
        ),
    ] = None
    members_reconciling: Annotated[
        Int | None,
        Field(
            description=(
                "KIP-848 groups only, members whose assignment is not yet the coordinator's "
                "target assignment (ConsumerGroupDescribe); 0 once every member has reconciled."
            )
        ),
    ] = None
    assignment_epoch: Annotated[
        Int | None,
        Field(
            description=(
                "Streams groups only, the epoch of the coordinator's latest task assignment; "
                "the group epoch (generation) once the assignment is computed."
            ),
            json_schema_extra={"format": "int64"},
        ),
    ] = None
    active_tasks: Annotated[
        Int | None, Field(description="Streams groups only, active tasks the members hold.")
    ] = None
    standby_tasks: Annotated[
        Int | None, Field(description="Streams groups only, standby tasks the members hold.")
    ] = None
    warmup_tasks: Annotated[
        Int | None, Field(description="Streams groups only, warm-up tasks the members hold.")
    ] = None
    sources: Annotated[
        dict[str, Str] | None,
        Field(description="Where each figure came from (broker, member-reports, none)."),
    ] = None
    member_details: Annotated[
        list[MemberDetailStatus] | None,
        Field(max_length=50, description="Members as last seen, at most 50."),
    ] = None


class ResourceStatus(StatusModel):
    """Observed state, written by the operator."""

    observed_generation: Annotated[
        Int | None,
        Field(
            description="The metadata.generation the status reflects.",
            json_schema_extra={"format": "int64"},
        ),
    ] = None
    conditions: Annotated[
        list[ConditionEntry] | None,
        Field(
            description="Ready, Progressing and Degraded conditions.",
            json_schema_extra={
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"],
            },
        ),
    ] = None
    rollout: RolloutProgressStatus | None = None
    settings: DeliveredSettingsStatus | None = None
    learning: LearningOutcomeStatus | None = None
    enforcement: EnforcementRecordStatus | None = None
    group: ObservedGroupStatus | None = None
    served_by: Annotated[
        str | None,
        Field(
            description=(
                "The operator replica (its pod's name) that serves this ConsumerGroup when the "
                "operator shares ConsumerGroups out among replicas (--shards), and the shard it "
                "is in: `<replica> (shard <i> of <n>)`. Written when a replica takes the group's "
                "shard; absent without sharding (docs/sharding.md)."
            ),
        ),
    ] = None
