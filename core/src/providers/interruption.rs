//! Interruption messages (upstream karpenter-provider-aws v1.14.1 `pkg/controllers/interruption`:
//! `parser.go`, `messages/*`, `utils.go`, `events/events.go`): the EventBridge events an SQS queue
//! delivers (spot interruption warnings, rebalance recommendations, AWS Health scheduled changes,
//! instance state changes, capacity-reservation interruptions), what each asks for, and which
//! NodeClaims it concerns. The controller receives and deletes the messages; what to do with each
//! NodeClaim is decided here.
//!
//! Not covered: `instance_status` / `system_status` (upstream's DescribeInstanceStatus poller,
//! which annotates a termination timestamp before deleting); a capacity reservation is not marked
//! unavailable (carpentry launches into none).

use serde::Deserialize;

use super::instance::parse_provider_id;
use crate::api::NodeClaim;
use crate::labels;

/// upstream `messages.Kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageKind {
    RebalanceRecommendation,
    ScheduledChange,
    SpotInterruption,
    InstanceStopped,
    InstanceTerminated,
    CapacityReservationInterruption,
    /// A message of no kind upstream acts on (another event, an empty body).
    NoOp,
}

impl MessageKind {
    /// upstream's name (the `message_type` metric label).
    pub fn as_str(self) -> &'static str {
        match self {
            MessageKind::RebalanceRecommendation => "rebalance_recommendation",
            MessageKind::ScheduledChange => "scheduled_change",
            MessageKind::SpotInterruption => "spot_interrupted",
            MessageKind::InstanceStopped => "instance_stopped",
            MessageKind::InstanceTerminated => "instance_terminated",
            MessageKind::CapacityReservationInterruption => "capacity_reservation_interrupted",
            MessageKind::NoOp => "no_op",
        }
    }
}

/// A parsed message: its kind and the instances it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub kind: MessageKind,
    pub instance_ids: Vec<String>,
    /// The event's `time` (RFC 3339), for the latency upstream measures.
    pub time: Option<String>,
}

/// A message that is not what its header says (upstream deletes it and logs the error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("the message is not an EventBridge event: {0}")]
    NotAnEvent(String),
    #[error("the {detail_type} event does not parse: {message}")]
    Detail { detail_type: String, message: String },
}

#[derive(Deserialize)]
struct Metadata {
    #[serde(default)]
    version: String,
    #[serde(default)]
    source: String,
    #[serde(default, rename = "detail-type")]
    detail_type: String,
    #[serde(default)]
    time: Option<String>,
}

#[derive(Deserialize)]
struct Event<D> {
    detail: D,
}

#[derive(Deserialize)]
struct InstanceDetail {
    #[serde(rename = "instance-id")]
    instance_id: String,
    #[serde(default)]
    state: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HealthDetail {
    #[serde(default)]
    service: String,
    #[serde(default)]
    event_type_category: String,
    #[serde(default)]
    affected_entities: Vec<AffectedEntity>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AffectedEntity {
    #[serde(default)]
    entity_value: String,
}

fn detail<D: for<'de> Deserialize<'de>>(body: &str, detail_type: &str) -> Result<D, ParseError> {
    serde_json::from_str::<Event<D>>(body)
        .map(|e| e.detail)
        .map_err(|e| ParseError::Detail { detail_type: detail_type.to_string(), message: e.to_string() })
}

/// upstream `EventParser.Parse`: by `version`, `source` and `detail-type`; an event of another
/// kind (or a state change to a state upstream ignores) is [`MessageKind::NoOp`].
pub fn parse(body: &str) -> Result<Message, ParseError> {
    let noop = |time: Option<String>| Message { kind: MessageKind::NoOp, instance_ids: Vec::new(), time };
    if body.is_empty() {
        return Ok(noop(None));
    }
    let md: Metadata = serde_json::from_str(body).map_err(|e| ParseError::NotAnEvent(e.to_string()))?;
    let one = |kind: MessageKind, id: String| Message { kind, instance_ids: vec![id], time: md.time.clone() };
    if md.version != "0" {
        return Ok(noop(md.time));
    }
    let dt = md.detail_type.as_str();
    Ok(match (md.source.as_str(), dt) {
        ("aws.ec2", "EC2 Spot Instance Interruption Warning") => {
            one(MessageKind::SpotInterruption, detail::<InstanceDetail>(body, dt)?.instance_id)
        }
        ("aws.ec2", "EC2 Instance Rebalance Recommendation") => {
            one(MessageKind::RebalanceRecommendation, detail::<InstanceDetail>(body, dt)?.instance_id)
        }
        ("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning") => {
            one(MessageKind::CapacityReservationInterruption, detail::<InstanceDetail>(body, dt)?.instance_id)
        }
        ("aws.ec2", "EC2 Instance State-change Notification") => {
            let d: InstanceDetail = detail(body, dt)?;
            match d.state.to_lowercase().as_str() {
                // upstream compares the original case for the kind.
                "stopping" | "stopped" if matches!(d.state.as_str(), "stopping" | "stopped") => {
                    one(MessageKind::InstanceStopped, d.instance_id)
                }
                "stopping" | "stopped" | "shutting-down" | "terminated" => {
                    one(MessageKind::InstanceTerminated, d.instance_id)
                }
                _ => noop(md.time.clone()),
            }
        }
        ("aws.health", "AWS Health Event") => {
            let d: HealthDetail = detail(body, dt)?;
            if d.service != "EC2" || d.event_type_category != "scheduledChange" {
                noop(md.time.clone())
            } else {
                Message {
                    kind: MessageKind::ScheduledChange,
                    instance_ids: d.affected_entities.into_iter().map(|e| e.entity_value).collect(),
                    time: md.time.clone(),
                }
            }
        }
        _ => noop(md.time.clone()),
    })
}

/// upstream `actionForMessage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// The NodeClaim is deleted: drained and terminated as any deleted NodeClaim.
    CordonAndDrain,
    NoAction,
}

pub fn action(kind: MessageKind) -> Action {
    match kind {
        MessageKind::ScheduledChange
        | MessageKind::SpotInterruption
        | MessageKind::InstanceStopped
        | MessageKind::InstanceTerminated
        | MessageKind::CapacityReservationInterruption => Action::CordonAndDrain,
        MessageKind::RebalanceRecommendation | MessageKind::NoOp => Action::NoAction,
    }
}

/// An event upstream publishes on the NodeClaim and its Node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Notice {
    pub reason: &'static str,
    pub message: &'static str,
    pub warning: bool,
}

/// upstream `notifyForMessage`.
pub fn notice(kind: MessageKind) -> Option<Notice> {
    let (reason, message, warning) = match kind {
        MessageKind::RebalanceRecommendation => {
            ("SpotRebalanceRecommendation", "Spot rebalance recommendation was triggered", false)
        }
        MessageKind::ScheduledChange => {
            ("InstanceUnhealthy", "An unhealthy warning was triggered for the instance", true)
        }
        MessageKind::SpotInterruption => ("SpotInterrupted", "Spot interruption warning was triggered", true),
        MessageKind::CapacityReservationInterruption => {
            ("CapacityReservationInstanceInterrupted", "Capacity Reservation interruption warning was triggered", true)
        }
        MessageKind::InstanceStopped => ("InstanceStopping", "Instance is stopping", true),
        MessageKind::InstanceTerminated => ("InstanceTerminating", "Instance is terminating", true),
        MessageKind::NoOp => return None,
    };
    Some(Notice { reason, message, warning })
}

/// upstream `TerminatingOnInterruption`'s reason, and its messages on the NodeClaim and the Node.
pub const TERMINATING_REASON: &str = "TerminatingOnInterruption";
pub const TERMINATING_NODECLAIM_MESSAGE: &str = "Interruption triggered termination for the NodeClaim";
pub const TERMINATING_NODE_MESSAGE: &str = "Interruption triggered termination for the Node";

/// What a message asks for one NodeClaim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handling {
    pub nodeclaim: String,
    pub notice: Option<Notice>,
    /// Delete the NodeClaim (it is not being deleted yet).
    pub delete: bool,
    /// A spot interruption: this (instance type, zone) is unavailable for spot.
    pub unavailable: Option<(String, String)>,
}

/// upstream `handleMessage`: the NodeClaims whose instance the message names (by the instance ID
/// in `status.providerID`) and what to do with each.
pub fn handle(message: &Message, nodeclaims: &[NodeClaim]) -> Vec<Handling> {
    if message.kind == MessageKind::NoOp {
        return Vec::new();
    }
    let mut out = Vec::new();
    for id in &message.instance_ids {
        for nc in nodeclaims {
            let provider_id = nc.status.as_ref().map(|s| s.provider_id.as_str()).unwrap_or_default();
            if parse_provider_id(provider_id).map(|(_, i)| i) != Some(id.as_str()) {
                continue;
            }
            let label = |key: &str| nc.metadata.labels.as_ref().and_then(|l| l.get(key)).cloned().unwrap_or_default();
            let (instance_type, zone) = (label(labels::INSTANCE_TYPE), label(labels::TOPOLOGY_ZONE));
            let unavailable =
                (message.kind == MessageKind::SpotInterruption && !instance_type.is_empty() && !zone.is_empty())
                    .then_some((instance_type, zone));
            out.push(Handling {
                nodeclaim: nc.name().to_string(),
                notice: notice(message.kind),
                delete: action(message.kind) == Action::CordonAndDrain && nc.metadata.deletion_timestamp.is_none(),
                unavailable,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(source: &str, detail_type: &str, detail: &str) -> String {
        format!(
            r#"{{"version":"0","id":"1","detail-type":"{detail_type}","source":"{source}","account":"123456789012","time":"2026-12-04T20:00:00Z","region":"us-west-2","resources":[],"detail":{detail}}}"#
        )
    }

    fn claim(name: &str, id: &str) -> NodeClaim {
        let mut nc = NodeClaim::new(name, Default::default());
        nc.metadata.labels = Some(
            [
                (labels::INSTANCE_TYPE.to_string(), "m5.large".to_string()),
                (labels::TOPOLOGY_ZONE.to_string(), "us-west-2a".to_string()),
            ]
            .into(),
        );
        nc.status.get_or_insert_with(Default::default).provider_id = format!("aws:///us-west-2a/{id}");
        nc
    }

    #[test]
    fn each_eventbridge_kind_parses_as_upstream_reads_it() {
        let spot = event(
            "aws.ec2",
            "EC2 Spot Instance Interruption Warning",
            r#"{"instance-id":"i-1","instance-action":"terminate"}"#,
        );
        let m = parse(&spot).unwrap();
        assert_eq!((m.kind, m.instance_ids.as_slice()), (MessageKind::SpotInterruption, &["i-1".to_string()][..]));
        assert_eq!(m.time.as_deref(), Some("2026-12-04T20:00:00Z"));
        let kind = |source: &str, dt: &str, detail: &str| parse(&event(source, dt, detail)).unwrap().kind;
        assert_eq!(
            kind("aws.ec2", "EC2 Instance Rebalance Recommendation", r#"{"instance-id":"i-1"}"#),
            MessageKind::RebalanceRecommendation
        );
        let state = |s: &str| {
            kind(
                "aws.ec2",
                "EC2 Instance State-change Notification",
                &format!(r#"{{"instance-id":"i-1","state":"{s}"}}"#),
            )
        };
        assert_eq!(state("stopping"), MessageKind::InstanceStopped);
        assert_eq!(state("stopped"), MessageKind::InstanceStopped);
        assert_eq!(state("shutting-down"), MessageKind::InstanceTerminated);
        assert_eq!(state("terminated"), MessageKind::InstanceTerminated);
        // upstream accepts any case but names the kind by the exact word.
        assert_eq!(state("Stopping"), MessageKind::InstanceTerminated);
        assert_eq!(state("running"), MessageKind::NoOp);
        let health = r#"{"service":"EC2","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"i-1"},{"entityValue":"i-2"}]}"#;
        let m = parse(&event("aws.health", "AWS Health Event", health)).unwrap();
        assert_eq!((m.kind, m.instance_ids.len()), (MessageKind::ScheduledChange, 2));
        let other = r#"{"service":"RDS","eventTypeCategory":"scheduledChange","affectedEntities":[]}"#;
        assert_eq!(kind("aws.health", "AWS Health Event", other), MessageKind::NoOp);
        assert_eq!(kind("aws.s3", "Object Created", "{}"), MessageKind::NoOp);
        assert_eq!(parse("").unwrap().kind, MessageKind::NoOp);
    }

    #[test]
    fn a_malformed_message_is_an_error_naming_what_failed() {
        assert!(matches!(parse("not json"), Err(ParseError::NotAnEvent(_))));
        let e =
            parse(&event("aws.ec2", "EC2 Spot Instance Interruption Warning", r#"{"instance":"i-1"}"#)).unwrap_err();
        assert!(e.to_string().contains("EC2 Spot Instance Interruption Warning"), "{e}");
    }

    #[test]
    fn a_spot_interruption_deletes_the_nodeclaim_and_marks_its_offering() {
        let claims = [claim("a", "i-1"), claim("b", "i-2")];
        let m = Message { kind: MessageKind::SpotInterruption, instance_ids: vec!["i-2".into()], time: None };
        let h = handle(&m, &claims);
        assert_eq!(h.len(), 1);
        assert_eq!(h[0].nodeclaim, "b");
        assert!(h[0].delete);
        assert_eq!(h[0].unavailable, Some(("m5.large".into(), "us-west-2a".into())));
        assert_eq!(h[0].notice.map(|n| n.reason), Some("SpotInterrupted"));
        // A rebalance recommendation only says so.
        let r = Message { kind: MessageKind::RebalanceRecommendation, ..m.clone() };
        let h = handle(&r, &claims);
        assert!(!h[0].delete && h[0].unavailable.is_none());
        assert_eq!(h[0].notice.map(|n| (n.reason, n.warning)), Some(("SpotRebalanceRecommendation", false)));
        // An instance no NodeClaim has: nothing.
        let stray = Message { instance_ids: vec!["i-9".into()], ..m };
        assert!(handle(&stray, &claims).is_empty());
    }
}
