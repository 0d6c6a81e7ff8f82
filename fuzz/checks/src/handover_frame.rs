//! The handover's decoder: whatever bytes and however many descriptors a
//! peer sends on the handover socket (or an agent to its keeper), every
//! frame type's decoder returns a value or an error that says what is
//! wrong, never a panic; what decodes encodes back to a frame that decodes
//! to the same value.

use graceful::{
    continuity::handover::wire::{self, Done, Hello, Offer, RecordFrame, Verdict},
    continuity::keeper::frames::{self, ToKeeper},
};

fn round_trip<T>(data: &[u8])
where
    T: for<'de> serde::Deserialize<'de> + serde::Serialize + wire::Versioned + PartialEq + std::fmt::Debug,
{
    if let Ok(v) = wire::decode::<T>(data) {
        let again = wire::decode::<T>(&wire::encode(&v)).expect("an encoded frame decodes");
        assert_eq!(again, v);
    }
}

/// The target: panics if `data` breaks what this file asserts.
pub fn check(data: &[u8]) {
    round_trip::<Hello>(data);
    round_trip::<Offer>(data);
    round_trip::<RecordFrame>(data);
    round_trip::<Done>(data);
    round_trip::<Verdict>(data);
    round_trip::<ToKeeper>(data);
    // The descriptors' count comes from the kernel: every count is tried.
    let fds = data.first().map_or(0, |b| usize::from(b % 5));
    if let Ok(r) = wire::decode_record(data, fds) {
        assert_eq!(r.fds(), fds);
    }
    if let Ok(op) = frames::decode(data, fds) {
        assert_eq!(frames::decode(&frames::encode(op.clone()), fds), Ok(op));
    }
}
