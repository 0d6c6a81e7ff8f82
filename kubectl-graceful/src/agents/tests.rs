use k8s_openapi::api::core::v1::{Container, EnvVar, PodSpec};

use super::*;

fn agent_pod(args: &[&str], env: Option<&str>) -> Pod {
    Pod {
        spec: Some(PodSpec {
            containers: vec![Container {
                name: CONTAINER.into(),
                args: Some(args.iter().map(|a| a.to_string()).collect()),
                env: env.map(|v| {
                    vec![EnvVar {
                        name: "GRACEFUL_API_ADDR".into(),
                        value: Some(v.into()),
                        ..EnvVar::default()
                    }]
                }),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

#[test]
fn the_api_port_is_the_one_the_agents_container_names() {
    let port = |args: &[&str], env| api_port(&agent_pod(args, env));
    // deploy/base and the chart's defaults.
    assert_eq!(port(&["--api-addr", "127.0.0.1:9465"], None), Ok(9465));
    // The chart's ports.api.
    assert_eq!(
        port(&["--gate-dir", "/x", "--api-addr", "127.0.0.1:19465"], None),
        Ok(19465)
    );
    assert_eq!(port(&["--api-addr=[::1]:7000"], None), Ok(7000));
    assert_eq!(port(&["--api-addr", ":7001"], None), Ok(7001));
    // The environment when no flag says it; the flag wins, as clap reads them.
    assert_eq!(port(&[], Some("127.0.0.1:7002")), Ok(7002));
    assert_eq!(
        port(&["--api-addr", "127.0.0.1:7003"], Some("127.0.0.1:1")),
        Ok(7003)
    );
    // Nothing said: the agent's default.
    assert_eq!(port(&[], None), Ok(graceful_api::POD_API_PORT));
    assert_eq!(api_port(&Pod::default()), Ok(graceful_api::POD_API_PORT));
    // Nothing to ask, in one line.
    let off = port(&["--api-addr", "off"], None).unwrap_err();
    assert!(off.contains("off") && !off.contains('\n'), "{off}");
    let bad = port(&["--api-addr", "localhost"], None).unwrap_err();
    assert!(bad.contains("names no port"), "{bad}");
}
