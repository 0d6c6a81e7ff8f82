//! What a handover or a keeper carries of a held hook, built in one place
//! from the parsed request ([`of`]), and read back ([`hook_of`]).
//!
//! The record is the handover's frame, which is bounded
//! ([`wire::MAX_FRAME`]); so the record must be, whatever the pod sent. It
//! carries the request as the agent parsed it, written anew (not the
//! bytes the pod sent: JSON takes any amount of whitespace), and the
//! request's own bounds keep that small: at most 64 container names of
//! 64 characters that need no escaping, two exclusion strings of 1 KiB,
//! a timeline of 512 points. The worst case is a test
//! (`every_admissible_hook_fits_a_frame`); a record that still does not
//! fit is refused before the hook is held ([`TooLarge`]).

use graceful_api::{hook_query, DrainRequest};

use super::{Hook, Origin};
use crate::continuity::handover::wire::{self, ExecHook, HttpHook, Record, RecordFrame, MAX_FRAME, VERSION};

/// A hook whose record would not fit a handover's frame.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("this request's record would take {0} bytes, over the {MAX_FRAME} a handover carries: send fewer or shorter settings")]
pub struct TooLarge(pub usize);

/// The record of `hook`, checked to fit a frame.
pub fn of(hook: &Hook) -> Result<Record, TooLarge> {
    let record = match &hook.origin {
        Origin::Exec { pid } => Record::ExecHook(ExecHook {
            pod: hook.pod.clone(),
            container: hook.container.clone(),
            pid: *pid,
            request: serde_json::to_string(&hook.request).expect("a drain request serializes"),
            arrived_ns: hook.arrived_ns,
            progress: hook.progress.clone(),
        }),
        Origin::Http {
            query,
            started_unix_ms,
        } => Record::HttpHook(HttpHook {
            pod: hook.pod.clone(),
            container: hook.container.clone(),
            query: query.clone(),
            arrived_ns: hook.arrived_ns,
            started_unix_ms: *started_unix_ms,
            progress: hook.progress.clone(),
        }),
    };
    let n = frame_len(&record);
    if n > MAX_FRAME {
        return Err(TooLarge(n));
    }
    Ok(record)
}

/// The frame `record` takes in the newest format (its body, as
/// [`wire::frame_len`] counts it).
pub fn frame_len(record: &Record) -> usize {
    let frame = RecordFrame {
        version: VERSION,
        record: record.clone(),
    };
    wire::encode(&frame).len() - 4
}

/// The hook a record carries (a held hook of an earlier agent); `None`
/// for a listener. An error is one line: the request no longer parses.
pub fn hook_of(record: Record) -> Option<Result<Hook, String>> {
    Some(match record {
        Record::ExecHook(h) => DrainRequest::parse(h.request.as_bytes()).map(|mut request| {
            // A record of an earlier release may carry the client's
            // timeline in its request too: the progress has it.
            if request.resumed.is_some() {
                request.resumed = Some(Default::default());
            }
            Hook {
                pod: h.pod,
                container: h.container,
                request,
                arrived_ns: h.arrived_ns,
                origin: Origin::Exec { pid: h.pid },
                progress: h.progress,
            }
        }),
        Record::HttpHook(h) => hook_query::parse(&h.query, h.started_unix_ms).map(|q| Hook {
            pod: h.pod,
            container: h.container,
            request: q.request,
            arrived_ns: h.arrived_ns,
            origin: Origin::Http {
                query: h.query,
                started_unix_ms: h.started_unix_ms,
            },
            progress: h.progress,
        }),
        _ => return None,
    })
}

#[cfg(test)]
mod tests;
