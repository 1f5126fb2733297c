//! A list of texts as a JSON array: how PostgreSQL's renew-many sends its names and holders in
//! one text parameter each, so that no statement binds an array.

/// `items` as a JSON array of strings, such as `["sweep","mail \"checks\""]`.
///
/// Every character is kept: `"` and `\` are escaped, control characters written as `\u00XX`,
/// everything else (any Unicode) as it is. JSON cannot carry a NUL into PostgreSQL text, and no
/// lease name or holder id holds one.
pub(crate) fn text_array<'a>(items: impl ExactSizeIterator<Item = &'a str>) -> String {
    let mut json = String::with_capacity(2 + items.len() * 40);
    json.push('[');
    for (index, item) in items.enumerate() {
        if index > 0 {
            json.push(',');
        }
        json.push('"');
        for c in item.chars() {
            match c {
                '"' => json.push_str("\\\""),
                '\\' => json.push_str("\\\\"),
                c if u32::from(c) < 0x20 => {
                    json.push_str(&format!("\\u{:04x}", u32::from(c)));
                }
                c => json.push(c),
            }
        }
        json.push('"');
    }
    json.push(']');
    json
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_escaped_and_kept_whole() {
        assert_eq!(text_array([].into_iter()), "[]");
        assert_eq!(
            text_array(["a", "b \"c\"", "\\", "tab\there\n", "🔒 é"].into_iter()),
            r#"["a","b \"c\"","\\","tab\u0009here\u000a","🔒 é"]"#
        );
    }
}
