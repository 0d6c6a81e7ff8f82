use super::*;

fn row(id: u64, inbound: u64, ignored: u64) -> Row {
    Row {
        cgroup_id: id,
        path: Some(format!("/k/p{id}")),
        inbound_live: inbound,
        inbound_ignored_live: ignored,
        outbound_live: 1,
        listeners: 2,
        inbound_total: 9,
        outbound_total: 4,
        inbound_closed_total: 3,
        last_inbound_open_ns: 10,
        last_inbound_close_ns: 20,
    }
}

#[test]
fn rows_carry_the_connections_left_out() {
    let json = serde_json::to_value(row(7, 6, 4)).unwrap();
    assert_eq!(json["inbound_live"], 6);
    assert_eq!(json["inbound_ignored_live"], 4);
    // Always there, zero too: every field of a row is.
    assert_eq!(
        serde_json::to_value(row(7, 6, 0)).unwrap()["inbound_ignored_live"],
        0
    );
    // A row from before the field reads as zero.
    let mut old = json.clone();
    old.as_object_mut().unwrap().remove("inbound_ignored_live");
    assert_eq!(serde_json::from_value::<Row>(old).unwrap(), row(7, 6, 0));

    let t = render(&[row(7, 6, 4), row(8, 2, 0)]);
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(
        lines[0],
        "    CGROUP INBOUND IGNORED OUTBOUND LISTEN  IN_TOTAL OUT_TOTAL IN_CLOSED  PATH"
    );
    assert_eq!(
        lines[1],
        "         7       6       4        1      2         9         4         3  /k/p7"
    );
    assert_eq!(
        lines[2],
        "         8       2       -        1      2         9         4         3  /k/p8"
    );
}
