//! The audit history table (the operator actions and the account's own changes recorded on an
//! account or a subscription; "Who" is the operator or the credential the account acted with).

use crate::page::when_text;
use maud::{html, Markup};
use shared::api::operator::audit::AuditView;

/// Who an actor is: an account's administrator (a token, or a console sign-in link) or an
/// operator.
pub fn role(actor: &str) -> &'static str {
    if actor.starts_with("token ") || actor.starts_with("link from ") {
        "administrator"
    } else {
        "operator"
    }
}

/// Audit entries, newest first as listed.
pub fn audit_table(entries: &[AuditView]) -> Markup {
    html! {
        div class="table-wrap" {
            table id="audit" class="stack" {
                thead { tr { th { "When" } th { "Who" } th { "What" } th { "Why" } th { "Details" } } }
                tbody {
                    @for a in entries {
                        tr data-testid="audit-row" data-audit-id=(a.id) {
                            td data-label="When" { (when_text(Some(&a.at))) }
                            td data-label="Who" { span data-testid="audit-operator" { (a.operator) } " " span class="muted" data-testid="audit-role" { (role(&a.operator)) } }
                            td data-label="What" data-testid="audit-action" { (a.action.as_str()) @if let Some(c) = &a.change_id { " " span class="mono" { (c) } } }
                            td data-label="Why" data-testid="audit-reason" { (a.reason) }
                            td data-label="Details" { @for (k, v) in &a.details { span class="mono" { (k) "=" (v) } " " } }
                        }
                    }
                    @if entries.is_empty() { tr { td colspan="5" class="muted" { "No audit entries." } } }
                }
            }
        }
    }
}
