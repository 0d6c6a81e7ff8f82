//! A node whose counters map is full (16,384 cgroups with counts, made by
//! many pods or by a tenant that can make cgroups): a new pod's cgroups
//! get no entry and its connections go uncounted. Its drain never
//! releases as drained on that zero: it runs to its deadline and says why
//! (its first line, its report, the agent's error count, the doctor).

use std::time::Instant;

use aya::maps::{HashMap, MapData};
use graceful::kernel::bpf::paths::PinDir;
use graceful_common::{names, CgroupCounters, MAX_CGROUPS};
use graceful_tests::{
    agent::{graceful, Agent},
    gate::{finish, hook, pod_holding},
};

use crate::{metric, require_root};

#[test]
fn a_pod_the_full_map_could_not_count_is_held_to_its_deadline_and_says_why() {
    require_root!();
    let agent = Agent::started_with_gate();
    // The map filled to its capacity with cgroups that are not this pod's
    // (ids no cgroup has: above every real one).
    let pins = PinDir::new(&agent.pin_dir);
    let data = MapData::from_pin(pins.map(names::COUNTERS)).unwrap();
    let mut map: HashMap<MapData, u64, CgroupCounters> =
        HashMap::try_from(aya::maps::Map::HashMap(data)).unwrap();
    let busy = CgroupCounters {
        inbound_live: 1,
        ..Default::default()
    };
    let fake = |i: u32| u64::MAX - u64::from(i);
    let mut filled = 0;
    for i in 0..MAX_CGROUPS {
        if map.insert(fake(i), busy, 0).is_ok() {
            filled += 1;
        }
    }
    // Entries the node's own connections hold count too: the map is full.
    let held = map.keys().filter(Result::is_ok).count();
    let mut empty = || {
        for i in 0..MAX_CGROUPS {
            let _ = map.remove(&fake(i));
        }
    };

    // A new pod, its 3 inbound connections uncounted.
    let (pod, _lb, _server, _clients) = pod_holding(3);
    let kernel_full = metric(&agent, "graceful_kernel_errors_total{kind=\"counters_full\"}");
    let started = Instant::now();
    let (report, out) = finish(hook(
        &agent,
        pod.container(0),
        &[
            "--policy", "drained", "--min", "0s", "--settle", "100ms", "--max", "3s",
        ],
    ));
    let waited = started.elapsed();
    empty();
    eprintln!(
        "{filled} entries filled ({held} held); the programs missed {kernel_full} entries; the pod's drain: {} after {} ms (3 connections held, none counted)",
        report["reason"], report["waited_ms"]
    );
    assert_eq!(
        held, MAX_CGROUPS as usize,
        "the map is full ({filled} entries filled)"
    );
    assert!(kernel_full >= 1, "the programs never found the map full");
    assert_eq!(report["reason"], "deadline", "{out}");
    assert_eq!(report["uncounted"], true, "{out}");
    assert!(waited.as_millis() >= 3000, "{waited:?}: {out}");
    assert!(
        out.contains("counters map was full"),
        "the hook's first line says why: {out}"
    );
    assert_eq!(
        metric(&agent, "graceful_errors_total{kind=\"drain_uncounted\"}"),
        1
    );
    let doctor = graceful(&agent.pin_dir, &["doctor"]);
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        text.contains("counters map") && text.contains("was full"),
        "{text}"
    );
}
