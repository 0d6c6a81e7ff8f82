use super::*;

#[test]
fn the_408_is_one_json_line_of_the_length_it_says() {
    let text = std::str::from_utf8(TIMED_OUT).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(body.len(), length);
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    assert!(v["error"].as_str().unwrap().contains("5 s"));
    assert_eq!(HEAD_TIMEOUT, Duration::from_secs(5));
}
