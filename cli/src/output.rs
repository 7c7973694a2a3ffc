//! How a subcommand shows the API's answer: as it came (`--json`), or as a short summary.

use serde_json::Value;

pub struct Output {
    json: bool,
}

impl Output {
    pub fn new(json: bool) -> Self {
        Output { json }
    }

    /// Prints `answer` as pretty JSON under `--json`, else through `summary`.
    pub fn show(&self, answer: &Value, summary: impl FnOnce(&Value)) {
        if self.json {
            println!(
                "{}",
                serde_json::to_string_pretty(answer).unwrap_or_default()
            );
        } else {
            summary(answer);
        }
    }
}

/// A string field for a summary, `-` if it is absent.
pub fn text(field: &Value) -> &str {
    field.as_str().unwrap_or("-")
}

/// Where a listing's next page starts, if it has one.
pub fn print_next_cursor(page: &Value) {
    if let Some(next) = page["next_cursor"].as_str() {
        println!("(more: --cursor {next})");
    }
}
