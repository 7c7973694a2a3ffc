//! The provider reference of a sent notification delivery (`PROVREF#{provider}#{reference}`):
//! where a provider's event about a message (SES through SNS, a signed webhook) finds its
//! delivery. Written in the transaction that makes the delivery `sent`
//! ([`super::notification_delivery::Effects`]).

use super::attrs::EXPIRES_AT;
use super::read;
use super::write::Write;
use super::{from_item, to_item, StoreError};
use crate::ids::NoticeId;
use serde::{Deserialize, Serialize};

/// The `kind` of a provider reference.
pub(crate) const PROVIDER_REF_KIND: &str = "provider_ref";
pub const PROVIDER_REF_SK: &str = "REF";

pub use super::keys::provider_ref_pk;

/// Where a provider reference points.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProviderRef {
    pub provider: String,
    pub provider_ref: String,
    pub notice_id: NoticeId,
    pub delivery_key: String,
}

impl ProviderRef {
    /// The reference `provider` gave the send of notification delivery `delivery_key`.
    pub fn new(
        provider: &str,
        provider_ref: &str,
        notice_id: NoticeId,
        delivery_key: String,
    ) -> Self {
        ProviderRef {
            provider: provider.to_string(),
            provider_ref: provider_ref.to_string(),
            notice_id,
            delivery_key,
        }
    }
}

/// A consistent read of a provider reference.
pub async fn get(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    provider: &str,
    reference: &str,
) -> Result<Option<ProviderRef>, StoreError> {
    read::get(
        dynamo,
        table,
        &provider_ref_pk(provider, reference),
        PROVIDER_REF_SK,
    )
    .await?
    .map(from_item)
    .transpose()
}

/// Writes a reference (a provider's references are unique: a repeat names the same delivery),
/// expiring with its delivery (`expires_at`, epoch seconds: the sent delivery's retention).
pub fn put(
    table: &str,
    reference: &ProviderRef,
    expires_at: Option<i64>,
) -> Result<Write, StoreError> {
    let mut item = to_item(
        reference,
        &provider_ref_pk(&reference.provider, &reference.provider_ref),
        PROVIDER_REF_SK,
        PROVIDER_REF_KIND,
    )?;
    if let Some(ttl) = expires_at {
        item.insert(EXPIRES_AT.into(), super::expr::n(ttl));
    }
    super::write::put(table, item)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_is_keyed_by_provider_and_reference() {
        let r = ProviderRef {
            provider: "ses".into(),
            provider_ref: "m-1".into(),
            notice_id: "n1".parse().unwrap(),
            delivery_key: "email-0".into(),
        };
        let Write::Put(p) = put("t", &r, Some(1_800_000_000)).unwrap() else {
            panic!("not a put")
        };
        assert_eq!(p.condition_expression(), None);
        let item = p.item();
        assert_eq!(item["pk"].as_s().unwrap(), "PROVREF#ses#m-1");
        assert_eq!(item["sk"].as_s().unwrap(), PROVIDER_REF_SK);
        assert_eq!(item["kind"].as_s().unwrap(), PROVIDER_REF_KIND);
        assert_eq!(item[EXPIRES_AT].as_n().unwrap(), "1800000000");
        let back: ProviderRef = from_item(item.clone()).unwrap();
        assert_eq!(back, r);
    }
}
