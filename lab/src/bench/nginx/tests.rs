use super::*;

#[test]
fn reads_wrks_request_count() {
    let out = "Running 5s test @ http://127.0.0.1:38211/\n  1 threads and 32 connections\n  \
               Thread Stats   Avg      Stdev     Max   +/- Stdev\n    Latency     1.09ms  \
               213.45us   5.20ms   80.12%\n    Req/Sec    29.41k     1.02k   31.50k    72.00%\n  \
               146325 requests in 5.00s, 22.19MB read\nRequests/sec:  29263.01\nTransfer/sec:      4.44MB\n";
    assert_eq!(parse_wrk(out), Some(146_325));
    assert_eq!(parse_wrk("Requests/sec: 1\n"), None);
}
