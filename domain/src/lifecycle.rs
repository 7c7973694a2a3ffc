//! Lifecycles are data.
//!
//! Every lifecycle in this crate is one static [`Lifecycle`] table. A row says, on one line: from
//! which state, on which outcome, by which trigger, to which state, under which guard, with which
//! side effects and by whom. The "cannot happen" rows name moves that are ruled out and why.
//! Everything else is derived from the table:
//!
//! * [`Lifecycle::on`] picks the row a state takes on an outcome, so no caller chooses a trigger
//!   with a hand-written `match` on the state;
//! * [`Lifecycle::check`] decides whether a move is allowed (and explains a refusal with the
//!   "cannot happen" row's reason when there is one);
//! * [`Lifecycle::condition`] / [`Lifecycle::expect`] produce the storage condition for the status
//!   write, so that DynamoDB refuses what the table refuses even when two writers race;
//! * [`crate::lifecycle_doc::render`] renders every table as `docs/lifecycles.md`.
//!
//! The vocabularies (statuses, triggers, outcomes, side effects, actors) are closed enums declared
//! with `status_enum!` and `term_enum!`, one line per value with its text for the doc. Side
//! effects are values, so the shell can match a row's effects exhaustively.

use std::collections::HashSet;
use std::fmt::{self, Debug};
use std::hash::Hash;

/// A lifecycle state. `as_str` is the stored value and the serde spelling.
pub trait Status: Copy + Eq + Hash + Debug + 'static {
    /// Every state, in table order.
    const ALL: &'static [Self];
    /// The stored spelling, e.g. `"skipped_filter"`.
    fn as_str(self) -> &'static str;
    /// What the state means, for `docs/lifecycles.md`.
    fn meaning(self) -> &'static str;
    /// The inverse of [`Status::as_str`].
    fn parse(s: &str) -> Option<Self> {
        Self::ALL
            .iter()
            .copied()
            .find(|status| status.as_str() == s)
    }
}

/// A word of a lifecycle's closed vocabulary: a trigger, an outcome, a side effect or an actor.
pub trait Term: Copy + Eq + Debug + 'static {
    /// Every value, in declaration order.
    const ALL: &'static [Self];
    /// The value in a few words, for `docs/lifecycles.md` (and, for some triggers, the API).
    fn text(self) -> &'static str;
}

/// Declares a status enum, one line per state: `Variant = "stored spelling" => "meaning"`.
/// Implements [`Status`], `Display` and serde with the stored spelling.
macro_rules! status_enum {
    ($(#[$meta:meta])* $vis:vis enum $name:ident {
        $($(#[$vmeta:meta])* $variant:ident = $spelling:literal => $meaning:literal),+ $(,)?
    }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        $vis enum $name {
            $($(#[$vmeta])* #[doc = $meaning] #[serde(rename = $spelling)] $variant),+
        }
        impl $crate::lifecycle::Status for $name {
            const ALL: &'static [Self] = &[$($name::$variant),+];
            fn as_str(self) -> &'static str {
                match self { $($name::$variant => $spelling),+ }
            }
            fn meaning(self) -> &'static str {
                match self { $($name::$variant => $meaning),+ }
            }
        }
        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str($crate::lifecycle::Status::as_str(*self))
            }
        }
    };
}
pub(crate) use status_enum;

/// Declares a vocabulary enum, one line per value: `Variant => "text"`. Implements [`Term`].
macro_rules! term_enum {
    ($(#[$meta:meta])* $vis:vis enum $name:ident {
        $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)?
    }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name {
            $($(#[$vmeta])* #[doc = $text] $variant),+
        }
        impl $crate::lifecycle::Term for $name {
            const ALL: &'static [Self] = &[$($name::$variant),+];
            fn text(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }
    };
}
pub(crate) use term_enum;

term_enum! {
    /// Who makes a move (the table's "who" column), shared by every lifecycle.
    pub enum Actor {
        DeliveryWorker => "delivery worker",
        PullCursorApi => "adapter, through the pull-cursor API",
        Operator => "operator, through the operator API",
        ReplayRun => "operator's replay run",
        RollUp => "event roll-up pass",
        ChannelWorker => "notification channel worker",
        ProviderFeedback => "provider confirmation intake",
        NightlySettle => "nightly settling",
        NoticeService => "notice service",
        AccountApi => "account, through the notices API",
    }
}

/// One row of a lifecycle table. `on` is the outcome the row answers ([`Lifecycle::on`]); in most
/// tables it is the trigger itself (`O = T`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition<S: 'static, T: 'static, E: 'static, O: 'static = T> {
    pub from: S,
    pub on: O,
    pub trigger: T,
    pub to: S,
    /// What must hold for the move, in a few words.
    pub guard: &'static str,
    /// What the shell does with the move, in order.
    pub effects: &'static [E],
    pub who: &'static [Actor],
}

impl<S: Copy, T: Copy, E, O> Transition<S, T, E, O> {
    /// The row's trigger and target, the shape callers pass to [`Lifecycle::expect`].
    pub fn movement(&self) -> (T, S) {
        (self.trigger, self.to)
    }
}

/// A row whose outcome is its trigger.
pub const fn row<S, T: Copy, E>(
    from: S,
    trigger: T,
    to: S,
    guard: &'static str,
    effects: &'static [E],
    who: &'static [Actor],
) -> Transition<S, T, E, T> {
    row_on(from, trigger, trigger, to, guard, effects, who)
}

/// A row that answers outcome `on` with `trigger` (for tables whose trigger depends on the state).
pub const fn row_on<S, T, E, O>(
    from: S,
    on: O,
    trigger: T,
    to: S,
    guard: &'static str,
    effects: &'static [E],
    who: &'static [Actor],
) -> Transition<S, T, E, O> {
    Transition {
        from,
        on,
        trigger,
        to,
        guard,
        effects,
        who,
    }
}

/// One "cannot happen" row: a move that no trigger may make, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidMove<S: 'static> {
    pub from: S,
    pub to: S,
    pub why: &'static str,
}

/// A "cannot happen" row on one line.
pub const fn cannot<S>(from: S, to: S, why: &'static str) -> InvalidMove<S> {
    InvalidMove { from, to, why }
}

/// A claim: a conditional write that takes an item for one piece of work (under a lease) without
/// moving its status. Like a row, it is data: the states it may take an item in, what must hold,
/// and the counter it bounds. [`ClaimRule::condition`] builds its storage condition, so storage
/// refuses a claim the rule refuses, and `docs/lifecycles.md` shows the rule with its condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimRule<S: 'static> {
    /// What is claimed, e.g. "claim of an attempt".
    pub name: &'static str,
    /// The states an item may be claimed in.
    pub from: &'static [S],
    /// What must hold, in a few words.
    pub guard: &'static str,
    /// The stored counter that must still be below the caller's limit, and that limit in words
    /// (e.g. `("attempts", "the subscription's Max Retries")`).
    pub bound: Option<(&'static str, &'static str)>,
    pub who: &'static [Actor],
}

impl<S: Status> ClaimRule<S> {
    /// The claim's storage condition: the stored status is one of `from` and, for a bounded
    /// claim, the counter is below `limit`. `limit` is ignored by an unbounded rule.
    pub fn condition(&self, limit: u64) -> StatusCondition {
        let from: Vec<&str> = self.from.iter().map(|s| s.as_str()).collect();
        let condition = StatusCondition::status_in(&from);
        match self.bound {
            Some((attribute, _)) => condition.and_attribute_below(attribute, limit),
            None => condition,
        }
    }

    /// The condition in words for the doc, the limit named rather than a number.
    pub fn condition_text(&self) -> String {
        let from: Vec<String> = self
            .from
            .iter()
            .map(|s| format!("'{}'", s.as_str()))
            .collect();
        let mut text = format!("{STATUS_ATTRIBUTE} IN ({})", from.join(", "));
        if let Some((attribute, limit)) = self.bound {
            text = format!(
                "({text}) AND (attribute_not_exists({attribute}) OR {attribute} < {limit})"
            );
        }
        text
    }
}

/// A lifecycle: its rows, its "cannot happen" rows and what `docs/lifecycles.md` says about it.
#[derive(Debug)]
pub struct Lifecycle<S: 'static, T: 'static, E: 'static, O: 'static = T> {
    /// The section title, e.g. `"Integration delivery"`; also the prefix of refusals.
    pub name: &'static str,
    /// What the lifecycle serves, in the project's own words (`docs/glossary.md`).
    pub reference: &'static str,
    /// One paragraph for the doc: what the lifecycle is about and what is special about it.
    pub summary: &'static str,
    /// The states an item is created in.
    pub initial: &'static [S],
    pub transitions: &'static [Transition<S, T, E, O>],
    pub invalid: &'static [InvalidMove<S>],
}

/// Why a move was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
pub enum TransitionError {
    /// A "cannot happen" row rules the move out.
    #[error("{lifecycle}: {from} → {to} cannot happen: {why}")]
    ForbiddenByRule {
        lifecycle: &'static str,
        from: &'static str,
        to: &'static str,
        why: &'static str,
    },
    /// The table has no row for this (from, trigger, to).
    #[error("{lifecycle}: no transition {from} → {to} by trigger {trigger}")]
    NotInTable {
        lifecycle: &'static str,
        from: &'static str,
        to: &'static str,
        trigger: String,
    },
    /// The table has no row for this state and outcome.
    #[error("{lifecycle}: {from} has no move on {outcome}")]
    NoMove {
        lifecycle: &'static str,
        from: &'static str,
        outcome: String,
    },
    /// No state at all may move to `to` by `trigger`, so there is no storage condition to build.
    #[error("{lifecycle}: no state moves to {to} by trigger {trigger}")]
    NoSource {
        lifecycle: &'static str,
        to: &'static str,
        trigger: String,
    },
}

/// The storage attribute every lifecycle status is stored under.
pub const STATUS_ATTRIBUTE: &str = "status";
/// The expression attribute name placeholder for [`STATUS_ATTRIBUTE`].
pub const STATUS_NAME_PLACEHOLDER: &str = "#status";
/// Prefix of the value placeholders of a status condition (`:status_from_0`, `:status_from_1`, …).
pub const STATUS_VALUE_PREFIX: &str = ":status_from_";

/// A storage condition so that storage refuses what the table refuses. Plain strings, no AWS types:
/// the shell turns it into a DynamoDB `ConditionExpression` with `ExpressionAttributeNames` and
/// `ExpressionAttributeValues` (every value is a string attribute).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusCondition {
    /// e.g. `#status IN (:status_from_0, :status_from_1)`.
    pub expression: String,
    /// e.g. `[("#status", "status")]`.
    pub names: Vec<(String, String)>,
    /// e.g. `[(":status_from_0", "pending"), (":status_from_1", "retrying")]`.
    pub values: Vec<(String, String)>,
    /// Number values (a bound such as `:attempts_below`), e.g. `[(":attempts_below", 6)]`.
    pub numbers: Vec<(String, u64)>,
}

impl StatusCondition {
    /// `#status IN (…)` over the given stored spellings. `allowed` must not be empty.
    pub fn status_in(allowed: &[&str]) -> StatusCondition {
        debug_assert!(
            !allowed.is_empty(),
            "a status condition needs at least one value"
        );
        let values: Vec<(String, String)> = allowed
            .iter()
            .enumerate()
            .map(|(i, s)| (format!("{STATUS_VALUE_PREFIX}{i}"), (*s).to_owned()))
            .collect();
        let placeholders: Vec<&str> = values.iter().map(|(p, _)| p.as_str()).collect();
        StatusCondition {
            expression: format!("{STATUS_NAME_PLACEHOLDER} IN ({})", placeholders.join(", ")),
            names: vec![(
                STATUS_NAME_PLACEHOLDER.to_owned(),
                STATUS_ATTRIBUTE.to_owned(),
            )],
            values,
            numbers: Vec::new(),
        }
    }

    /// The stored status values the condition accepts, in order.
    pub fn allowed(&self) -> Vec<&str> {
        self.values
            .iter()
            .filter(|(p, _)| p.starts_with(STATUS_VALUE_PREFIX))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// Adds `AND #attribute = :attribute_eq` (string value). `attribute` must be a plain
    /// identifier (letters, digits, underscores) so that it is a valid placeholder.
    pub fn and_attribute_equals(mut self, attribute: &str, value: &str) -> StatusCondition {
        debug_assert!(attribute
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_'));
        let name = format!("#{attribute}");
        let placeholder = format!(":{attribute}_eq");
        self.expression = format!("({}) AND {name} = {placeholder}", self.expression);
        self.names.push((name, attribute.to_owned()));
        self.values.push((placeholder, value.to_owned()));
        self
    }

    /// Adds `AND (attribute_not_exists(#attribute) OR #attribute < :attribute_below)`: a
    /// counter that must still be below `limit` (an absent counter is zero). `attribute` must be a
    /// plain identifier, as for [`StatusCondition::and_attribute_equals`].
    pub fn and_attribute_below(mut self, attribute: &str, limit: u64) -> StatusCondition {
        debug_assert!(attribute
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_'));
        let name = format!("#{attribute}");
        let placeholder = format!(":{attribute}_below");
        self.expression = format!(
            "({}) AND (attribute_not_exists({name}) OR {name} < {placeholder})",
            self.expression
        );
        self.names.push((name, attribute.to_owned()));
        self.numbers.push((placeholder, limit));
        self
    }

    /// A readable rendering for logs and error messages, with the placeholders substituted.
    pub fn sql_like(&self) -> String {
        let mut out = self.expression.clone();
        for (placeholder, number) in &self.numbers {
            out = out.replace(placeholder.as_str(), &number.to_string());
        }
        // Longest placeholders first so that `:status_from_1` does not clobber `:status_from_10`.
        let mut values: Vec<&(String, String)> = self.values.iter().collect();
        values.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
        for (placeholder, value) in values {
            out = out.replace(placeholder.as_str(), &format!("'{value}'"));
        }
        for (placeholder, name) in &self.names {
            out = out.replace(placeholder.as_str(), name);
        }
        out
    }
}

impl fmt::Display for StatusCondition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.sql_like())
    }
}

impl<S: Status, T: Term, E: Term, O: Term> Lifecycle<S, T, E, O> {
    /// The row `from` takes on `outcome`: the one place a trigger is chosen from a state. Refused
    /// with the "cannot happen" reason when the outcome would lead to a ruled-out move, otherwise
    /// as [`TransitionError::NoMove`].
    pub fn on(
        &self,
        from: S,
        outcome: O,
    ) -> Result<&'static Transition<S, T, E, O>, TransitionError> {
        if let Some(row) = self
            .transitions
            .iter()
            .find(|t| t.from == from && t.on == outcome)
        {
            return Ok(row);
        }
        let ruled_out = self.transitions.iter().find_map(|t| {
            (t.on == outcome)
                .then(|| self.ruled_out(from, t.to))
                .flatten()
        });
        Err(ruled_out.unwrap_or_else(|| TransitionError::NoMove {
            lifecycle: self.name,
            from: from.as_str(),
            outcome: format!("{outcome:?}"),
        }))
    }

    fn ruled_out(&self, from: S, to: S) -> Option<TransitionError> {
        self.invalid
            .iter()
            .find(|m| m.from == from && m.to == to)
            .map(|m| TransitionError::ForbiddenByRule {
                lifecycle: self.name,
                from: from.as_str(),
                to: to.as_str(),
                why: m.why,
            })
    }

    /// Checks one move against the table. A "cannot happen" move is refused with its reason;
    /// anything else without a row is refused as not in the table.
    pub fn check(
        &self,
        from: S,
        trigger: T,
        to: S,
    ) -> Result<&'static Transition<S, T, E, O>, TransitionError> {
        if let Some(refusal) = self.ruled_out(from, to) {
            return Err(refusal);
        }
        self.transitions
            .iter()
            .find(|t| t.from == from && t.trigger == trigger && t.to == to)
            .ok_or_else(|| TransitionError::NotInTable {
                lifecycle: self.name,
                from: from.as_str(),
                to: to.as_str(),
                trigger: format!("{trigger:?}"),
            })
    }

    /// Whether the table has any row `from → to`, whatever its trigger.
    pub fn allows(&self, from: S, to: S) -> bool {
        self.transitions
            .iter()
            .any(|t| t.from == from && t.to == to)
    }

    /// Every `from` the table allows for `(trigger, to)`, in table order, without duplicates.
    pub fn sources(&self, trigger: T, to: S) -> Vec<S> {
        unique(
            self.transitions
                .iter()
                .filter(|t| t.trigger == trigger && t.to == to)
                .map(|t| t.from),
        )
    }

    /// Every state reachable from `from` in one move, in table order, without duplicates.
    pub fn targets(&self, from: S) -> Vec<S> {
        unique(
            self.transitions
                .iter()
                .filter(|t| t.from == from)
                .map(|t| t.to),
        )
    }

    /// The rows a trigger names.
    pub fn rows_for(&self, trigger: T) -> impl Iterator<Item = &'static Transition<S, T, E, O>> {
        self.transitions
            .iter()
            .filter(move |t| t.trigger == trigger)
    }

    /// The storage condition for a status write by `(trigger, to)`: the stored status must be one
    /// of the table's sources. Refused when no state may make this move.
    pub fn condition(&self, trigger: T, to: S) -> Result<StatusCondition, TransitionError> {
        let sources = self.sources(trigger, to);
        if sources.is_empty() {
            return Err(TransitionError::NoSource {
                lifecycle: self.name,
                to: to.as_str(),
                trigger: format!("{trigger:?}"),
            });
        }
        let allowed: Vec<&str> = sources.iter().map(|s| s.as_str()).collect();
        Ok(StatusCondition::status_in(&allowed))
    }

    /// An expected-state write: checks `from → to` by `trigger` and returns the condition that the
    /// stored status is still exactly `from` (the conditional claim that decides a race).
    pub fn expect(&self, from: S, trigger: T, to: S) -> Result<StatusCondition, TransitionError> {
        self.check(from, trigger, to)?;
        Ok(StatusCondition::status_in(&[from.as_str()]))
    }

    /// Whether `state` has no outgoing row at all.
    pub fn is_absorbing(&self, state: S) -> bool {
        !self.transitions.iter().any(|t| t.from == state)
    }

    /// Every state reachable from `initial` (including `initial`) through table rows.
    pub fn reachable_from(&self, initial: S) -> HashSet<S> {
        let mut seen = HashSet::from([initial]);
        let mut frontier = vec![initial];
        while let Some(state) = frontier.pop() {
            for next in self.targets(state) {
                if seen.insert(next) {
                    frontier.push(next);
                }
            }
        }
        seen
    }

    /// Internal consistency of the table: no duplicate rows, no two rows answering one outcome
    /// from one state, no row a "cannot happen" row rules out, no duplicate "cannot happen" rows.
    /// Returns the problems found.
    pub fn inconsistencies(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for (i, a) in self.transitions.iter().enumerate() {
            for b in &self.transitions[i + 1..] {
                if a.from == b.from && a.to == b.to && a.trigger == b.trigger {
                    problems.push(format!(
                        "duplicate row {:?} → {:?} by {:?}",
                        a.from, a.to, a.trigger
                    ));
                }
                if a.from == b.from && a.on == b.on {
                    problems.push(format!("two rows answer {:?} from {:?}", a.on, a.from));
                }
            }
            if self.ruled_out(a.from, a.to).is_some() {
                problems.push(format!(
                    "row {:?} → {:?} is also listed as cannot happen",
                    a.from, a.to
                ));
            }
        }
        for (i, a) in self.invalid.iter().enumerate() {
            if self.invalid[i + 1..]
                .iter()
                .any(|b| a.from == b.from && a.to == b.to)
            {
                problems.push(format!("duplicate invalid row {:?} → {:?}", a.from, a.to));
            }
        }
        problems
    }
}

fn unique<S: PartialEq>(items: impl Iterator<Item = S>) -> Vec<S> {
    let mut out = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod testing {
    //! Exhaustive checks shared by every lifecycle's tests. The expected rows are written out
    //! a second time in each test module, so these compare the static table against an
    //! independent transcription of the same lifecycle.
    use super::*;

    /// Asserts, for every `from × trigger × to`, that `check` accepts exactly `rows` and refuses
    /// `invalid` with its reason, and everything else as not in the table; and that every row is
    /// what [`Lifecycle::on`] answers for its state and outcome.
    pub(crate) fn assert_exhaustive<S: Status, T: Term, E: Term, O: Term>(
        lifecycle: &Lifecycle<S, T, E, O>,
        rows: &[(S, T, S)],
        invalid: &[(S, S, &'static str)],
    ) -> usize {
        assert!(
            lifecycle.inconsistencies().is_empty(),
            "{:?}",
            lifecycle.inconsistencies()
        );
        assert_eq!(
            lifecycle.transitions.len(),
            rows.len(),
            "row count of {}",
            lifecycle.name
        );
        assert_eq!(
            lifecycle.invalid.len(),
            invalid.len(),
            "invalid row count of {}",
            lifecycle.name
        );
        let mut combinations = 0;
        for &from in S::ALL {
            for &to in S::ALL {
                let forbidden = invalid.iter().find(|(f, t, _)| *f == from && *t == to);
                for &trigger in T::ALL {
                    combinations += 1;
                    let result = lifecycle.check(from, trigger, to);
                    if let Some((_, _, why)) = forbidden {
                        assert_eq!(
                            result,
                            Err(TransitionError::ForbiddenByRule {
                                lifecycle: lifecycle.name,
                                from: from.as_str(),
                                to: to.as_str(),
                                why,
                            }),
                            "{from:?} → {to:?} by {trigger:?}"
                        );
                    } else if rows.contains(&(from, trigger, to)) {
                        let row = result
                            .unwrap_or_else(|e| panic!("{from:?} → {to:?} by {trigger:?}: {e}"));
                        assert_eq!((row.from, row.trigger, row.to), (from, trigger, to));
                        assert!(lifecycle.allows(from, to));
                    } else {
                        assert!(
                            matches!(result, Err(TransitionError::NotInTable { .. })),
                            "{from:?} → {to:?} by {trigger:?} must not be allowed, got {result:?}"
                        );
                    }
                }
                let expected_allows = rows.iter().any(|(f, _, t)| *f == from && *t == to);
                assert_eq!(
                    lifecycle.allows(from, to),
                    expected_allows,
                    "allows({from:?}, {to:?})"
                );
            }
        }
        // Every row is the table's answer to its state and outcome.
        for row in lifecycle.transitions {
            assert_eq!(lifecycle.on(row.from, row.on), Ok(row));
        }
        // Every trigger and every outcome is used by the table, and every condition is exactly
        // the sources.
        for &outcome in O::ALL {
            assert!(
                lifecycle.transitions.iter().any(|t| t.on == outcome),
                "{outcome:?} is unused"
            );
        }
        for &trigger in T::ALL {
            assert!(
                lifecycle.rows_for(trigger).next().is_some(),
                "{trigger:?} is unused"
            );
            assert!(!trigger.text().is_empty());
            for &to in S::ALL {
                let expected: Vec<&str> = S::ALL
                    .iter()
                    .copied()
                    .filter(|&from| rows.contains(&(from, trigger, to)))
                    .map(|s| s.as_str())
                    .collect();
                match lifecycle.condition(trigger, to) {
                    Ok(condition) => {
                        let mut got = condition.allowed();
                        got.sort_unstable();
                        let mut want = expected.clone();
                        want.sort_unstable();
                        assert_eq!(got, want, "condition({trigger:?}, {to:?})");
                    }
                    Err(e) => {
                        assert!(expected.is_empty(), "condition({trigger:?}, {to:?}): {e}");
                        assert!(matches!(e, TransitionError::NoSource { .. }));
                    }
                }
            }
        }
        // Spellings round-trip.
        for &s in S::ALL {
            assert_eq!(S::parse(s.as_str()), Some(s));
        }
        assert_eq!(S::parse("no such status"), None);
        combinations
    }

    /// States reachable from `initial` over the transcribed rows (independent of the table).
    pub(crate) fn reachable<S: Status, T: Term>(rows: &[(S, T, S)], initial: S) -> HashSet<S> {
        let mut seen = HashSet::from([initial]);
        loop {
            let before = seen.len();
            for (from, _, to) in rows {
                if seen.contains(from) {
                    seen.insert(*to);
                }
            }
            if seen.len() == before {
                return seen;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    status_enum! {
        enum Light {
            Red = "red" => "stop",
            Green = "green" => "go",
            Broken = "broken" => "out of order",
        }
    }
    term_enum! {
        enum Switch {
            Go => "go",
            Stop => "stop",
        }
    }
    term_enum! {
        enum Lamp {
            Flash => "flash",
        }
    }
    const W: &[Actor] = &[Actor::Operator];
    #[rustfmt::skip]
    static LIGHT: Lifecycle<Light, Switch, Lamp> = Lifecycle {
        name: "test light",
        reference: "TEST-LIGHT",
        summary: "A light for the tests.",
        initial: &[Light::Red],
        transitions: &[
            row(Light::Red, Switch::Go, Light::Green, "g", &[Lamp::Flash], W),
            row(Light::Green, Switch::Stop, Light::Red, "g", &[], W),
            row(Light::Broken, Switch::Stop, Light::Red, "g", &[], W),
        ],
        invalid: &[cannot(Light::Broken, Light::Green, "a broken light cannot go")],
    };

    fn broken_cannot_go() -> TransitionError {
        TransitionError::ForbiddenByRule {
            lifecycle: "test light",
            from: "broken",
            to: "green",
            why: "a broken light cannot go",
        }
    }

    #[test]
    fn check_refuses_with_the_cannot_happen_reason_first() {
        assert_eq!(
            LIGHT.check(Light::Broken, Switch::Go, Light::Green),
            Err(broken_cannot_go())
        );
        assert_eq!(
            LIGHT
                .check(Light::Red, Switch::Stop, Light::Green)
                .unwrap_err()
                .to_string(),
            "test light: no transition red → green by trigger Stop"
        );
        assert!(LIGHT.check(Light::Red, Switch::Go, Light::Green).is_ok());
    }

    #[test]
    fn on_looks_the_row_up_by_state_and_outcome() {
        let row = LIGHT.on(Light::Red, Switch::Go).unwrap();
        assert_eq!(row.movement(), (Switch::Go, Light::Green));
        assert_eq!(row.effects, &[Lamp::Flash]);
        assert_eq!(LIGHT.on(Light::Broken, Switch::Go), Err(broken_cannot_go()));
        assert_eq!(
            LIGHT.on(Light::Red, Switch::Stop).unwrap_err().to_string(),
            "test light: red has no move on Stop"
        );
    }

    #[test]
    fn the_enum_macros_give_spelling_meaning_serde_and_text() {
        assert_eq!(Light::parse("broken"), Some(Light::Broken));
        assert_eq!(Light::Green.meaning(), "go");
        assert_eq!(Light::Broken.to_string(), "broken");
        assert_eq!(serde_json::to_value(Light::Red).unwrap(), "red");
        assert_eq!(Switch::ALL, &[Switch::Go, Switch::Stop]);
        assert_eq!(Switch::Stop.text(), "stop");
    }

    #[test]
    fn condition_lists_every_source_with_valid_placeholders() {
        let c = LIGHT.condition(Switch::Stop, Light::Red).unwrap();
        assert_eq!(c.expression, "#status IN (:status_from_0, :status_from_1)");
        assert_eq!(c.names, vec![("#status".to_owned(), "status".to_owned())]);
        assert_eq!(
            c.values,
            vec![
                (":status_from_0".to_owned(), "green".to_owned()),
                (":status_from_1".to_owned(), "broken".to_owned())
            ]
        );
        assert_eq!(c.to_string(), "status IN ('green', 'broken')");
        assert!(matches!(
            LIGHT.condition(Switch::Go, Light::Red),
            Err(TransitionError::NoSource { .. })
        ));
        for (p, _) in &c.values {
            assert!(
                p.starts_with(':')
                    && p[1..]
                        .chars()
                        .all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
            );
        }
    }

    #[test]
    fn expect_and_extra_attribute() {
        let c = LIGHT
            .expect(Light::Green, Switch::Stop, Light::Red)
            .unwrap()
            .and_attribute_equals("reason", "x");
        assert_eq!(
            c.expression,
            "(#status IN (:status_from_0)) AND #reason = :reason_eq"
        );
        assert_eq!(c.allowed(), vec!["green"]);
        assert_eq!(c.sql_like(), "(status IN ('green')) AND reason = 'x'");
        assert!(LIGHT.expect(Light::Red, Switch::Stop, Light::Red).is_err());
    }

    #[test]
    fn sql_like_does_not_clobber_longer_placeholders() {
        let many: Vec<String> = (0..12).map(|i| format!("s{i}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        let c = StatusCondition::status_in(&refs);
        assert!(c.sql_like().contains("'s1', 's2'"));
        assert!(c.sql_like().ends_with("'s10', 's11')"));
    }

    #[test]
    fn two_rows_answering_one_outcome_from_one_state_are_an_inconsistency() {
        static TWICE: Lifecycle<Light, Switch, Lamp> = Lifecycle {
            name: "twice",
            reference: "",
            summary: "",
            initial: &[],
            transitions: &[
                row(Light::Red, Switch::Go, Light::Green, "g", &[], W),
                row(Light::Red, Switch::Go, Light::Broken, "g", &[], W),
            ],
            invalid: &[],
        };
        assert_eq!(TWICE.inconsistencies(), vec!["two rows answer Go from Red"]);
    }

    #[test]
    fn exhaustive_helper_on_the_test_table() {
        let n = testing::assert_exhaustive(
            &LIGHT,
            &[
                (Light::Red, Switch::Go, Light::Green),
                (Light::Green, Switch::Stop, Light::Red),
                (Light::Broken, Switch::Stop, Light::Red),
            ],
            &[(Light::Broken, Light::Green, "a broken light cannot go")],
        );
        assert_eq!(n, 3 * 3 * 2);
        assert_eq!(
            LIGHT.reachable_from(Light::Red),
            HashSet::from([Light::Red, Light::Green])
        );
        assert!(!LIGHT.is_absorbing(Light::Broken));
    }
}
