use super::lengths;
use crate::layout::scan::strip;

fn of(src: &str) -> Vec<(String, usize, bool)> {
    lengths(src, &strip(src))
        .into_iter()
        .map(|l| (l.name, l.lines, l.excused))
        .collect()
}

#[test]
fn code_lines_are_counted_and_comments_and_blanks_are_not() {
    let src = "/// doc\nfn a() {\n    let x = 1;\n\n    // a comment\n    let s = \"{\";\n    x\n}\n";
    assert_eq!(of(src), vec![("a".to_string(), 5, false)]);
}

#[test]
fn nested_functions_pointer_types_and_declarations() {
    let src = "trait T { fn d(&self); }\nfn outer(f: fn(u8) -> u8) -> u8 {\n    fn inner() -> u8 {\n        1\n    }\n    f(inner())\n}\n";
    assert_eq!(
        of(src),
        vec![("outer".to_string(), 6, false), ("inner".to_string(), 3, false)]
    );
}

#[test]
fn the_expect_attribute_excuses_even_over_several_lines() {
    let src = "fn x() {}\n#[expect(\n    clippy::too_many_lines,\n    reason = \"wiring, step by step\"\n)]\npub fn long() {\n    1;\n}\n";
    assert_eq!(
        of(src),
        vec![("x".to_string(), 1, false), ("long".to_string(), 3, true)]
    );
}
