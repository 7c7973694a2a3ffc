//! Keys built from typed ids keep exactly the key strings stored items have (a test-only module:
//! it names every item module, which nothing else may import from here).

use crate::ids::{id, AccountId, ChangeId, IntegrationId, SubscriptionId, TokenId};
use crate::store::{account, audit, delivery, event, integration, keys, notice};
use crate::store::{replay_job, subscription, token};

#[test]
fn keys_built_from_typed_ids_keep_their_stored_form() {
    let (a, s, c, i): (AccountId, SubscriptionId, ChangeId, IntegrationId) =
        (id("acct1"), id("sub1"), id("01HCHANGE"), id("int1"));
    assert_eq!(
        account::key(&a),
        ("ACCT#acct1".to_string(), "ACCOUNT".to_string())
    );
    assert_eq!(integration::key(&a, &i).1, "INTEG#int1");
    assert_eq!(subscription::key(&a, &s).1, "SUB#sub1");
    assert_eq!(event::key(&a, &c).0, "EVT#acct1#01HCHANGE");
    assert_eq!(
        delivery::key(&a, &c, &s),
        ("EVT#acct1#01HCHANGE".to_string(), "DLV#sub1".to_string())
    );
    assert_eq!(keys::token_pk(&id::<TokenId>("tok1")), "TOKEN#tok1");
    assert_eq!(keys::subscription_sort(&c), "01HCHANGE");
    assert_eq!(token::token_ref_sk(&id("tok1")), "TOKEN#tok1");
    assert_eq!(audit::audit_list_key(&a, &s), "AUDIT#acct1#sub1");
    assert_eq!(replay_job::job_sk(&id("job1")), "JOB#job1");
    assert_eq!(notice::key(&id("ntc_1")).0, "NOTICE#ntc_1");
    assert_eq!(keys::delivery_id(&c, &s).as_str(), "dlv_01HCHANGE_sub1");
}

/// An id is stored as its bare text in an item, as it serializes (`ids`, the domain's own test).
#[test]
fn a_typed_id_is_stored_as_its_bare_text() {
    let integration: IntegrationId = id("i1");
    let item: std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue> =
        serde_dynamo::to_item(std::collections::HashMap::from([("id", integration)])).unwrap();
    assert_eq!(item["id"].as_s().unwrap(), "i1");
}
