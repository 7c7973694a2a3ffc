//! Renders every lifecycle table as `docs/lifecycles.md`: per lifecycle a Mermaid state diagram,
//! its states, its rows (one line each) and its "cannot happen" rows. The document is the table:
//! a unit test fails when the committed file differs from [`render`]'s output.
//!
//! Regenerate with `UPDATE_LIFECYCLES=1 cargo test -p domain --lib lifecycle_doc`.

use std::fmt::Write;

use super::event::{EVENT_LIFECYCLE, INTERNAL_LIFECYCLE};
use super::integration_delivery::{
    transmit_status, DeliveryStatus, TransmitStatus, ATTEMPT_CLAIM, DELIVERY_LIFECYCLE,
};
use super::lifecycle::{ClaimRule, Lifecycle, Status, Term};
use super::notice::NOTICE_LIFECYCLE;
use super::notification_delivery::NOTIFICATION_LIFECYCLE;
use super::replay::REPLAY_LIFECYCLE;
use super::subscription::SUBSCRIPTION_LIFECYCLE;

/// How to regenerate the document (also the stale-file test's message).
pub const REGENERATE: &str = "UPDATE_LIFECYCLES=1 cargo test -p domain --lib lifecycle_doc";

/// The whole of `docs/lifecycles.md`.
pub fn render() -> String {
    let mut out = String::new();
    out.push_str("# Lifecycles\n\n");
    out.push_str(
        "Every stored status of Rhythm delivery moves along one table in `domain/src`. \
         The same table chooses the move for an outcome, refuses moves it does not list, and \
         builds the storage condition of every status write (`#status IN (:from)`), so storage \
         refuses what the table refuses even when two writers race. This file is generated \
         from those tables; do not edit it by hand. Regenerate it with\n",
    );
    let _ = writeln!(out, "`{REGENERATE}`.\n");
    out.push_str("Columns: *on* is the outcome the row answers (shown where it differs from the trigger), *guard* what must hold, *side effects* what the shell does, in order, and *who* makes the move.\n\n");
    let sections = [
        DELIVERY_LIFECYCLE.name,
        "Delivery log words",
        EVENT_LIFECYCLE.name,
        INTERNAL_LIFECYCLE.name,
        SUBSCRIPTION_LIFECYCLE.name,
        REPLAY_LIFECYCLE.name,
        NOTIFICATION_LIFECYCLE.name,
        NOTICE_LIFECYCLE.name,
    ];
    for name in sections {
        let _ = writeln!(out, "* [{name}](#{})", anchor(name));
    }
    out.push('\n');
    section(
        &mut out,
        &DELIVERY_LIFECYCLE,
        "integration_delivery::DELIVERY_LIFECYCLE",
    );
    claims(
        &mut out,
        &[(&ATTEMPT_CLAIM, "integration_delivery::ATTEMPT_CLAIM")],
    );
    delivery_log_words(&mut out);
    section(&mut out, &EVENT_LIFECYCLE, "event::EVENT_LIFECYCLE");
    section(&mut out, &INTERNAL_LIFECYCLE, "event::INTERNAL_LIFECYCLE");
    section(
        &mut out,
        &SUBSCRIPTION_LIFECYCLE,
        "subscription::SUBSCRIPTION_LIFECYCLE",
    );
    section(&mut out, &REPLAY_LIFECYCLE, "replay::REPLAY_LIFECYCLE");
    section(
        &mut out,
        &NOTIFICATION_LIFECYCLE,
        "notification_delivery::NOTIFICATION_LIFECYCLE",
    );
    section(&mut out, &NOTICE_LIFECYCLE, "notice::NOTICE_LIFECYCLE");
    out
}

/// The heading's anchor as Markdown renderers derive it.
fn anchor(heading: &str) -> String {
    heading.to_lowercase().replace(' ', "-")
}

fn section<S: Status, T: Term, E: Term, O: Term>(
    out: &mut String,
    lifecycle: &Lifecycle<S, T, E, O>,
    table: &str,
) {
    let _ = writeln!(out, "## {}\n\n{}\n", lifecycle.name, lifecycle.summary);
    let _ = writeln!(
        out,
        "Table: `domain::{table}`. Part of: {}.\n",
        lifecycle.reference
    );
    state_diagram(out, lifecycle);
    states_table::<S>(out);
    transitions_table(out, lifecycle);
    invalid_moves(out, lifecycle);
}

/// The Mermaid state diagram: initial states, every transition, then untouched states.
fn state_diagram<S: Status, T: Term, E: Term, O: Term>(
    out: &mut String,
    lifecycle: &Lifecycle<S, T, E, O>,
) {
    out.push_str("```mermaid\nstateDiagram-v2\n");
    for initial in lifecycle.initial {
        let _ = writeln!(out, "    [*] --> {}", initial.as_str());
    }
    for row in lifecycle.transitions {
        let _ = writeln!(
            out,
            "    {} --> {}: {}",
            row.from.as_str(),
            row.to.as_str(),
            row.trigger.text()
        );
    }
    // States no row touches would not appear otherwise.
    for &state in S::ALL {
        let touched = lifecycle.initial.contains(&state)
            || lifecycle
                .transitions
                .iter()
                .any(|t| t.from == state || t.to == state);
        if !touched {
            let _ = writeln!(out, "    {}", state.as_str());
        }
    }
    out.push_str("```\n\n");
}

/// Each state with its meaning.
fn states_table<S: Status>(out: &mut String) {
    out.push_str("| state | meaning |\n|---|---|\n");
    for &state in S::ALL {
        let _ = writeln!(out, "| `{}` | {} |", state.as_str(), state.meaning());
    }
    out.push('\n');
}

/// One row per transition; the `on` column only when some row's event differs from its trigger.
fn transitions_table<S: Status, T: Term, E: Term, O: Term>(
    out: &mut String,
    lifecycle: &Lifecycle<S, T, E, O>,
) {
    let show_on = lifecycle
        .transitions
        .iter()
        .any(|t| t.on.text() != t.trigger.text());
    if show_on {
        out.push_str("| from | on | trigger | to | guard | side effects | who |\n|---|---|---|---|---|---|---|\n");
    } else {
        out.push_str(
            "| from | trigger | to | guard | side effects | who |\n|---|---|---|---|---|---|\n",
        );
    }
    for row in lifecycle.transitions {
        let on = if show_on {
            format!(" {} |", row.on.text())
        } else {
            String::new()
        };
        let effects = if row.effects.is_empty() {
            "none".to_owned()
        } else {
            join(row.effects.iter().map(|e| e.text()), "; ")
        };
        let _ = writeln!(
            out,
            "| `{}` |{on} {} | `{}` | {} | {effects} | {} |",
            row.from.as_str(),
            row.trigger.text(),
            row.to.as_str(),
            row.guard,
            join(row.who.iter().map(|w| w.text()), " or "),
        );
    }
    out.push('\n');
}

/// The moves ruled out, with why.
fn invalid_moves<S: Status, T: Term, E: Term, O: Term>(
    out: &mut String,
    lifecycle: &Lifecycle<S, T, E, O>,
) {
    out.push_str("Cannot happen:\n\n");
    if lifecycle.invalid.is_empty() {
        out.push_str("No move is ruled out beyond the table: a move without a row is refused.\n\n");
    } else {
        out.push_str("| from | to | why |\n|---|---|---|\n");
        for m in lifecycle.invalid {
            let _ = writeln!(
                out,
                "| `{}` | `{}` | {} |",
                m.from.as_str(),
                m.to.as_str(),
                m.why
            );
        }
        out.push('\n');
    }
}

/// A lifecycle's claims: writes that take an item for work without a status move, each with the
/// storage condition its rule builds.
fn claims<S: Status>(out: &mut String, claims: &[(&ClaimRule<S>, &str)]) {
    out.push_str(
        "Claims (a worker takes the item under a lease; the status does not move):\n\n\
         | claim | from | guard | storage condition | who |\n|---|---|---|---|---|\n",
    );
    for (claim, table) in claims {
        let from: Vec<String> = claim
            .from
            .iter()
            .map(|s| format!("`{}`", s.as_str()))
            .collect();
        let from = from.join(", ");
        let _ = writeln!(
            out,
            "| {} (`domain::{table}`) | {from} | {} | `{}` | {} |",
            claim.name,
            claim.guard,
            claim.condition_text(),
            join(claim.who.iter().map(|w| w.text()), " or "),
        );
    }
    out.push('\n');
}

/// The one mapping from a delivery's stored status to the event monitor's Delivery log word.
fn delivery_log_words(out: &mut String) {
    out.push_str("## Delivery log words\n\n");
    out.push_str(
        "The event monitor's Delivery log names a delivery's state with words of its own. Only \
         the integration delivery status is stored; the word is derived \
         (`domain::integration_delivery::transmit_status`). *processing* is a held worker \
         lease, not a status write.\n\n",
    );
    out.push_str("| stored status | word, no lease | word, lease held |\n|---|---|---|\n");
    let word = |status, lease| {
        transmit_status(status, lease).map_or("none (never a delivery)".to_owned(), |w| {
            format!("`{}`", w.as_str())
        })
    };
    for &status in DeliveryStatus::ALL {
        let _ = writeln!(
            out,
            "| `{}` | {} | {} |",
            status.as_str(),
            word(status, false),
            word(status, true)
        );
    }
    out.push_str("\n| word | meaning |\n|---|---|\n");
    for &w in TransmitStatus::ALL {
        let _ = writeln!(out, "| `{}` | {} |", w.as_str(), w.meaning());
    }
    out.push('\n');
}

fn join<'a>(parts: impl Iterator<Item = &'a str>, separator: &str) -> String {
    parts.collect::<Vec<_>>().join(separator)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn doc_path() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/lifecycles.md")
    }

    #[test]
    fn docs_lifecycles_md_is_the_rendering_of_the_tables() {
        let rendered = render();
        if std::env::var_os("UPDATE_LIFECYCLES").is_some() {
            std::fs::write(doc_path(), &rendered).expect("write docs/lifecycles.md");
        }
        let committed = std::fs::read_to_string(doc_path()).unwrap_or_default();
        assert!(
            committed == rendered,
            "docs/lifecycles.md differs from the lifecycle tables; regenerate it with `{REGENERATE}`"
        );
    }

    /// Asserts that every text of `lifecycle` fits its place: a table cell takes no `|` and no
    /// line break, a diagram label (the trigger) no `:` or `;` either.
    fn assert_texts_fit<S: Status, T: Term, E: Term, O: Term>(lifecycle: &Lifecycle<S, T, E, O>) {
        let mut cells: Vec<&str> = S::ALL.iter().map(|s| s.meaning()).collect();
        cells.extend(O::ALL.iter().map(|o| o.text()));
        cells.extend(E::ALL.iter().map(|e| e.text()));
        for row in lifecycle.transitions {
            cells.push(row.guard);
            cells.extend(row.who.iter().map(|w| w.text()));
        }
        cells.extend(lifecycle.invalid.iter().map(|m| m.why));
        for text in cells {
            assert!(!text.trim().is_empty(), "{}: an empty text", lifecycle.name);
            assert!(
                !text.contains(['|', '\n']),
                "{text:?} would break a table row"
            );
        }
        // A row's effects share one cell, joined with "; ".
        for text in E::ALL.iter().map(|e| e.text()) {
            assert!(!text.contains(';'), "{text:?} would read as two effects");
        }
        for text in T::ALL.iter().map(|t| t.text()) {
            assert!(
                !text.trim().is_empty(),
                "{}: an empty trigger",
                lifecycle.name
            );
            assert!(
                !text.contains(['|', '\n', ':', ';']),
                "{text:?} would break a diagram label"
            );
        }
        assert!(!lifecycle.summary.is_empty() && !lifecycle.name.contains('\n'));
    }

    #[test]
    fn every_text_fits_its_table_cell_or_diagram_label() {
        assert_texts_fit(&DELIVERY_LIFECYCLE);
        assert_texts_fit(&EVENT_LIFECYCLE);
        assert_texts_fit(&INTERNAL_LIFECYCLE);
        assert_texts_fit(&SUBSCRIPTION_LIFECYCLE);
        assert_texts_fit(&REPLAY_LIFECYCLE);
        assert_texts_fit(&NOTIFICATION_LIFECYCLE);
        assert_texts_fit(&NOTICE_LIFECYCLE);
    }

    #[test]
    fn every_row_is_one_line_of_its_section() {
        let doc = render();
        let delivery = &doc[doc.find("## Integration delivery").unwrap()
            ..doc.find("## Delivery log words").unwrap()];
        for row in DELIVERY_LIFECYCLE.transitions {
            let line = delivery
                .lines()
                .find(|l| {
                    l.starts_with(&format!("| `{}` | {} |", row.from, row.on.text()))
                        && l.contains(row.trigger.text())
                })
                .unwrap_or_else(|| panic!("no line for {row:?}"));
            assert!(line.contains(&format!("| `{}` | {} |", row.to, row.guard)));
            for effect in row.effects {
                assert!(line.contains(effect.text()), "{line}");
            }
        }
        assert!(
            !delivery.contains("    skipped_filter --> pending"),
            "a cannot-happen move is not drawn"
        );
        assert!(delivery.contains("    [*] --> skipped_filter"));
        let notification = &doc[doc.find("## Notification delivery").unwrap()..];
        // Reserved states no row writes still appear in the diagram.
        assert!(notification.contains("\n    deferred\n"));
        assert!(notification.contains("| `sending` | `sending` | a second consumer"));
    }

    #[test]
    fn the_claim_of_an_attempt_shows_its_max_retries_guard_and_condition() {
        let doc = render();
        let line = doc
            .lines()
            .find(|l| l.starts_with("| claim of an attempt "))
            .expect("the claim's line");
        assert!(line.contains("`pending`, `retrying`"), "{line}");
        assert!(
            line.contains("fewer than its subscription's Max Retries"),
            "{line}"
        );
        assert!(
            line.contains("attempts < the subscription's Max Retries"),
            "{line}"
        );
        // In the delivery section, before the next one.
        let claim_at = doc.find(line).unwrap();
        assert!(claim_at > doc.find("## Integration delivery").unwrap());
        assert!(claim_at < doc.find("## Delivery log words").unwrap());
    }

    #[test]
    fn the_delivery_log_words_follow_the_one_mapping() {
        let doc = render();
        assert!(doc.contains("| `pending` | `pending` | `processing` |"));
        assert!(doc.contains("| `dead` | `failed` | `failed` |"));
        assert!(doc
            .contains("| `skipped_filter` | none (never a delivery) | none (never a delivery) |"));
    }

    #[test]
    fn every_table_is_consistent() {
        assert!(DELIVERY_LIFECYCLE.inconsistencies().is_empty());
        assert!(EVENT_LIFECYCLE.inconsistencies().is_empty());
        assert!(INTERNAL_LIFECYCLE.inconsistencies().is_empty());
        assert!(SUBSCRIPTION_LIFECYCLE.inconsistencies().is_empty());
        assert!(REPLAY_LIFECYCLE.inconsistencies().is_empty());
        assert!(NOTIFICATION_LIFECYCLE.inconsistencies().is_empty());
        assert!(NOTICE_LIFECYCLE.inconsistencies().is_empty());
    }
}
