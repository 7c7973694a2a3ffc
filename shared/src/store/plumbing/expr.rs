//! Small helpers between the pure core's storage conditions and the DynamoDB SDK.

use crate::domain::lifecycle::StatusCondition;
use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::HashMap;

pub fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}
pub fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

/// Names and values of an expression, gathered as it is built.
#[derive(Debug, Default, Clone)]
pub struct Expr {
    pub names: HashMap<String, String>,
    pub values: HashMap<String, AttributeValue>,
}

impl Expr {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn name(mut self, placeholder: &str, attribute: &str) -> Self {
        self.names.insert(placeholder.into(), attribute.into());
        self
    }
    pub fn value(mut self, placeholder: &str, v: AttributeValue) -> Self {
        self.values.insert(placeholder.into(), v);
        self
    }
    /// Adds a lifecycle's status condition and returns its expression text.
    pub fn status(&mut self, condition: &StatusCondition) -> String {
        for (p, a) in &condition.names {
            self.names.insert(p.clone(), a.clone());
        }
        for (p, v) in &condition.values {
            self.values.insert(p.clone(), s(v));
        }
        for (p, v) in &condition.numbers {
            self.values.insert(p.clone(), n(*v));
        }
        condition.expression.clone()
    }
    pub(crate) fn names_opt(&self) -> Option<HashMap<String, String>> {
        (!self.names.is_empty()).then(|| self.names.clone())
    }
    pub(crate) fn values_opt(&self) -> Option<HashMap<String, AttributeValue>> {
        (!self.values.is_empty()).then(|| self.values.clone())
    }
}
