use clap::Parser as _;

use super::*;

#[test]
fn api_addr_is_an_address_and_port_or_off() {
    for ok in [
        "off",
        "127.0.0.1:9464",
        "0.0.0.0:0",
        "[::]:9464",
        "[::1]:80",
        ":9464",
        ":0",
    ] {
        assert_eq!(api_addr(ok).as_deref(), Ok(ok));
    }
    for bad in [
        "notanaddr",
        "",
        "127.0.0.1",
        "localhost:9464",
        ":",
        ":65536",
        ": 9464",
        "OFF",
    ] {
        let e = api_addr(bad).unwrap_err();
        assert!(e.contains("not an address") && !e.contains('\n'), "{bad}: {e}");
    }
}

#[test]
fn a_malformed_api_addr_fails_flag_parsing() {
    let e = crate::cli::Cli::try_parse_from(["graceful", "daemon", "--api-addr", "notanaddr"]).unwrap_err();
    let text = e.render().to_string();
    assert!(
        text.lines()
            .next()
            .unwrap()
            .contains("\"notanaddr\" is not an address"),
        "{text}"
    );
    assert!(crate::cli::Cli::try_parse_from(["graceful", "daemon", "--api-addr", "off"]).is_ok());
}
