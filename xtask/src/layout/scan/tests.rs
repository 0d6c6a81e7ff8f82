use super::*;

fn paths(src: &str) -> Vec<String> {
    refs(&strip(src)).into_iter().map(|r| r.path.join("::")).collect()
}

#[test]
fn reads_plain_grouped_and_nested_paths() {
    let src = "use crate::a::b;\nuse crate::{c::{d, e as f}, g::*};\nfn x() { super::h::i(); self::j::K; }\n";
    assert_eq!(
        paths(src),
        [
            "crate::a::b",
            "crate::c::d",
            "crate::c::e",
            "crate::g",
            "super::h::i",
            "self::j::K"
        ]
    );
}

#[test]
fn ignores_comments_strings_chars_and_lifetimes() {
    let src = r##"
// use crate::commented;
/* crate::block /* nested crate::x */ */
fn f<'a>(s: &'a str) -> char { let _ = "crate::in_string"; let _ = r#"crate::raw"#; '"' }
use crate::real;
"##;
    assert_eq!(paths(src), ["crate::real"]);
    let r = refs(&strip(src));
    assert_eq!(r[0].line, 5);
}

#[test]
fn finds_inline_test_modules_not_outlined_ones() {
    let src = "fn a() {}\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn t() { {} }\n}\n#[cfg(test)]\nmod beside;\n";
    assert_eq!(test_blocks(&strip(src)), vec![(2, 6)]);
}
