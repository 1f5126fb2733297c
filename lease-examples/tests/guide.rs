//! docs/implementing-a-store.md shows its worked example as two files of this crate, word for
//! word: this test keeps them the same, so the guide never shows code that does not compile or
//! does not pass the suite.

use std::path::Path;

/// The Rust code blocks of a Markdown text, in order.
fn rust_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match current.as_mut() {
            None if line.trim_start().starts_with("```rust") => current = Some(String::new()),
            None => {}
            Some(_) if line.trim_start().starts_with("```") => {
                blocks.extend(current.take());
            }
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
        }
    }
    blocks
}

#[test]
fn the_guide_shows_the_compiled_example_word_for_word() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |path: &str| {
        std::fs::read_to_string(crate_dir.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
    };
    let guide = read("../docs/implementing-a-store.md");
    let blocks = rust_blocks(&guide);
    let sources = ["src/counting.rs", "tests/counting_store.rs"];
    assert_eq!(
        blocks.len(),
        sources.len(),
        "every Rust block of the guide must be one of {sources:?}"
    );
    for (block, source) in blocks.iter().zip(sources) {
        assert!(
            *block == read(source),
            "the guide's copy of {source} differs from the file: copy the file into the guide"
        );
    }
}

#[test]
fn finds_rust_blocks_and_nothing_else() {
    let markdown = "text\n```rust\nfn a() {}\n```\n```sh\nls\n```\n```rust\nfn b() {}\n\n```\n";
    assert_eq!(rust_blocks(markdown), ["fn a() {}\n", "fn b() {}\n\n"]);
}
