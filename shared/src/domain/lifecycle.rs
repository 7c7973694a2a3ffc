//! Lifecycles are data.
//!
//! Every lifecycle in this crate is one static [`Lifecycle`] table that reads like its seed: each
//! row carries the seed's `from`, `to`, trigger, guard text, side-effect texts and actor, and the
//! seed's "invalid" rows carry the seed's "why". Everything else is derived from the table:
//!
//! * [`Lifecycle::check`] decides whether a move is allowed (and explains a refusal with the seed's
//!   own words when the seed forbids it);
//! * [`Lifecycle::condition`] / [`Lifecycle::expect`] produce the storage condition for the status
//!   write, so that DynamoDB refuses what the table refuses even when two writers race;
//! * [`Lifecycle::reachable_from`], [`Lifecycle::is_absorbing`] and friends answer questions the
//!   tests and the operator API ask.
//!
//! The shell never writes a status without going through `check` and the matching condition.

use std::collections::HashSet;
use std::fmt::{self, Debug};
use std::hash::Hash;

/// A lifecycle state. `as_str` is the seed's spelling, which is also the stored value and the serde
/// spelling of every implementing enum.
pub trait Status: Copy + Eq + Hash + Debug + 'static {
    /// Every state, in the seed's order.
    const ALL: &'static [Self];
    /// The seed's spelling, e.g. `"skipped_filter"`.
    fn as_str(self) -> &'static str;
    /// The inverse of [`Status::as_str`].
    fn parse(s: &str) -> Option<Self> {
        Self::ALL
            .iter()
            .copied()
            .find(|status| status.as_str() == s)
    }
}

/// A lifecycle trigger: one variant per distinct trigger named in the seed.
pub trait Trigger: Copy + Eq + Debug + 'static {
    /// Every trigger, in the seed's order.
    const ALL: &'static [Self];
    /// The seed's wording of the trigger, e.g. `"Acknowledge initial push"`.
    fn seed_text(self) -> &'static str;
}

/// One row of a seed's transition table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition<S: 'static, T: 'static> {
    pub from: S,
    pub to: S,
    pub trigger: T,
    /// The seed's guard, verbatim or nearly so.
    pub guard: &'static str,
    /// The seed's side effects, verbatim or nearly so.
    pub side_effects: &'static [&'static str],
    /// The seed's actor ("who").
    pub who: &'static str,
}

/// One row of a seed's "invalid" (cannot happen) table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidMove<S: 'static> {
    pub from: S,
    pub to: S,
    /// The seed's "why".
    pub why: &'static str,
}

/// A lifecycle: the seed's identifier, its transition rows and its invalid rows.
#[derive(Debug)]
pub struct Lifecycle<S: 'static, T: 'static> {
    /// The seed identifier, e.g. `"STATE-PFM-INT-012"`.
    pub name: &'static str,
    pub transitions: &'static [Transition<S, T>],
    pub invalid: &'static [InvalidMove<S>],
}

/// Why a move was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
pub enum TransitionError {
    /// The seed lists the move under "what cannot happen".
    #[error("{lifecycle}: {from} → {to} cannot happen: {why}")]
    ForbiddenBySeed {
        lifecycle: &'static str,
        from: &'static str,
        to: &'static str,
        why: &'static str,
    },
    /// The seed's table has no row for this (from, trigger, to).
    #[error("{lifecycle}: no transition {from} → {to} by trigger {trigger}")]
    NotInTable {
        lifecycle: &'static str,
        from: &'static str,
        to: &'static str,
        trigger: String,
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

    /// A readable rendering for logs and error messages, with the placeholders substituted.
    pub fn sql_like(&self) -> String {
        let mut out = self.expression.clone();
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

impl<S: Status, T: Trigger> Lifecycle<S, T> {
    /// Checks one move against the table. Seed-invalid moves are refused with the seed's "why";
    /// anything else without a row is refused as not in the table.
    pub fn check(
        &self,
        from: S,
        trigger: T,
        to: S,
    ) -> Result<&'static Transition<S, T>, TransitionError> {
        if let Some(invalid) = self.invalid.iter().find(|m| m.from == from && m.to == to) {
            return Err(TransitionError::ForbiddenBySeed {
                lifecycle: self.name,
                from: from.as_str(),
                to: to.as_str(),
                why: invalid.why,
            });
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
        let mut out = Vec::new();
        for t in self
            .transitions
            .iter()
            .filter(|t| t.trigger == trigger && t.to == to)
        {
            if !out.contains(&t.from) {
                out.push(t.from);
            }
        }
        out
    }

    /// Every state reachable from `from` in one move, in table order, without duplicates.
    pub fn targets(&self, from: S) -> Vec<S> {
        let mut out = Vec::new();
        for t in self.transitions.iter().filter(|t| t.from == from) {
            if !out.contains(&t.to) {
                out.push(t.to);
            }
        }
        out
    }

    /// The rows a trigger names.
    pub fn rows_for(&self, trigger: T) -> impl Iterator<Item = &'static Transition<S, T>> {
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

    /// Internal consistency of the table: no duplicate rows, no row the invalid list forbids, no
    /// duplicate invalid rows. Returns the problems found.
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
            }
            if self
                .invalid
                .iter()
                .any(|m| m.from == a.from && m.to == a.to)
            {
                problems.push(format!(
                    "row {:?} → {:?} is also listed as invalid",
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

#[cfg(test)]
pub(crate) mod testing {
    //! Exhaustive checks shared by every lifecycle's tests. The expected rows are written out
    //! independently in each test module (copied from the seed), so these compare the static table
    //! against a second transcription of the seed.
    use super::*;

    /// Asserts, for every `from × trigger × to`, that `check` accepts exactly `rows` and refuses
    /// `invalid` with the seed's why, and everything else as not in the table.
    pub(crate) fn assert_exhaustive<S: Status, T: Trigger>(
        lifecycle: &Lifecycle<S, T>,
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
                            Err(TransitionError::ForbiddenBySeed {
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
        // Every trigger is used by the table, and every condition is exactly the sources.
        for &trigger in T::ALL {
            assert!(
                lifecycle.rows_for(trigger).next().is_some(),
                "{trigger:?} is unused"
            );
            assert!(!trigger.seed_text().is_empty());
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
    pub(crate) fn reachable<S: Status, T: Trigger>(rows: &[(S, T, S)], initial: S) -> HashSet<S> {
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

    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    enum Light {
        Red,
        Green,
        Broken,
    }
    impl Status for Light {
        const ALL: &'static [Self] = &[Light::Red, Light::Green, Light::Broken];
        fn as_str(self) -> &'static str {
            match self {
                Light::Red => "red",
                Light::Green => "green",
                Light::Broken => "broken",
            }
        }
    }
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Switch {
        Go,
        Stop,
    }
    impl Trigger for Switch {
        const ALL: &'static [Self] = &[Switch::Go, Switch::Stop];
        fn seed_text(self) -> &'static str {
            match self {
                Switch::Go => "Go",
                Switch::Stop => "Stop",
            }
        }
    }
    static LIGHT: Lifecycle<Light, Switch> = Lifecycle {
        name: "TEST-LIGHT",
        transitions: &[
            Transition {
                from: Light::Red,
                to: Light::Green,
                trigger: Switch::Go,
                guard: "g",
                side_effects: &[],
                who: "w",
            },
            Transition {
                from: Light::Green,
                to: Light::Red,
                trigger: Switch::Stop,
                guard: "g",
                side_effects: &[],
                who: "w",
            },
            Transition {
                from: Light::Broken,
                to: Light::Red,
                trigger: Switch::Stop,
                guard: "g",
                side_effects: &[],
                who: "w",
            },
        ],
        invalid: &[InvalidMove {
            from: Light::Broken,
            to: Light::Green,
            why: "a broken light cannot go",
        }],
    };

    #[test]
    fn check_refuses_with_the_seed_why_first() {
        assert_eq!(
            LIGHT.check(Light::Broken, Switch::Go, Light::Green),
            Err(TransitionError::ForbiddenBySeed {
                lifecycle: "TEST-LIGHT",
                from: "broken",
                to: "green",
                why: "a broken light cannot go"
            })
        );
        assert_eq!(
            LIGHT
                .check(Light::Red, Switch::Stop, Light::Green)
                .unwrap_err()
                .to_string(),
            "TEST-LIGHT: no transition red → green by trigger Stop"
        );
        assert!(LIGHT.check(Light::Red, Switch::Go, Light::Green).is_ok());
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
