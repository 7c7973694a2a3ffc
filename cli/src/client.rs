//! The HTTP API's `/operator` routes, one method per operation the CLI uses. Each builds its
//! route's URL, sends the request with the operator's bearer token and answers the API's JSON as
//! it came (`--json` prints it unchanged; summaries read a few fields of it), or fails with a
//! [`Refusal`] when the API answered with a problem document.

use anyhow::{anyhow, bail, Context as _, Result};
use reqwest::Method;
use serde_json::{json, Value};
use std::fmt;
use std::time::Duration;
use url::Url;

/// A client of one API (its base URL, with the stage in AWS) for one operator (the token).
pub struct Client {
    http: reqwest::Client,
    base: Url,
    token: String,
}

/// Which deliveries a listing holds; absent parts do not filter.
#[derive(Debug)]
pub struct DeliveryFilter<'a> {
    /// Comma-separated statuses, e.g. `dead,failed`.
    pub statuses: Option<&'a str>,
    pub from: Option<&'a str>,
    pub to: Option<&'a str>,
}

/// Which page of a listing: at most `limit` items, after `cursor` (a listing's `next_cursor`).
#[derive(Debug)]
pub struct Page<'a> {
    pub limit: Option<u32>,
    pub cursor: Option<&'a str>,
}

/// The API's refusal of a request, from its problem document.
#[derive(Debug)]
pub struct Refusal {
    pub status: u16,
    pub title: String,
    pub detail: String,
    pub invalid_fields: Vec<InvalidField>,
}

/// One entry of a problem document's `errors`.
#[derive(Debug)]
pub struct InvalidField {
    pub field: String,
    pub message: String,
}

impl Client {
    pub fn new(api_url: &str, token: String) -> Result<Self> {
        let mut base = Url::parse(api_url).with_context(|| format!("--api-url {api_url}"))?;
        if !matches!(base.scheme(), "http" | "https") {
            bail!("--api-url must be an http(s) URL");
        }
        if !base.path().ends_with('/') {
            let path = format!("{}/", base.path());
            base.set_path(&path);
        }
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()?;
        Ok(Client { http, base, token })
    }

    /// `POST …/subscriptions/{subscription}/deliveries/{change}/retry`
    pub async fn retry_delivery(
        &self,
        account: &str,
        subscription: &str,
        change: &str,
        reason: &str,
    ) -> Result<Value> {
        let url =
            self.subscription_url(account, subscription, &["deliveries", change, "retry"], &[])?;
        self.post(url, json!({"reason": reason})).await
    }

    /// `POST …/subscriptions/{subscription}/replays`: a replay job for the window [from, to).
    pub async fn create_replay(
        &self,
        account: &str,
        subscription: &str,
        from: &str,
        to: &str,
        reason: &str,
    ) -> Result<Value> {
        let url = self.subscription_url(account, subscription, &["replays"], &[])?;
        self.post(url, json!({"from": from, "to": to, "reason": reason}))
            .await
    }

    /// `GET …/accounts/{account}/replays/{job}`
    pub async fn get_replay(&self, account: &str, job: &str) -> Result<Value> {
        self.get(self.account_url(account, &["replays", job], &[])?)
            .await
    }

    /// `POST …/accounts/{account}/replays/{job}/resume`
    pub async fn resume_replay(&self, account: &str, job: &str, reason: &str) -> Result<Value> {
        let url = self.account_url(account, &["replays", job, "resume"], &[])?;
        self.post(url, json!({"reason": reason})).await
    }

    /// `GET …/accounts/{account}/replays`, of one subscription if given.
    pub async fn list_replays(&self, account: &str, subscription: Option<&str>) -> Result<Value> {
        let query = [("subscription_id", subscription.map(str::to_owned))];
        self.get(self.account_url(account, &["replays"], &query)?)
            .await
    }

    /// `POST …/subscriptions/{subscription}/resume`
    pub async fn resume_subscription(
        &self,
        account: &str,
        subscription: &str,
        reason: &str,
    ) -> Result<Value> {
        let url = self.subscription_url(account, subscription, &["resume"], &[])?;
        self.post(url, json!({"reason": reason})).await
    }

    /// `GET …/subscriptions/{subscription}`
    pub async fn get_subscription(&self, account: &str, subscription: &str) -> Result<Value> {
        self.get(self.subscription_url(account, subscription, &[], &[])?)
            .await
    }

    /// `GET …/subscriptions/{subscription}/deliveries`
    pub async fn list_deliveries(
        &self,
        account: &str,
        subscription: &str,
        filter: &DeliveryFilter<'_>,
        page: &Page<'_>,
    ) -> Result<Value> {
        let query: Vec<_> = filter.query().into_iter().chain(page.query()).collect();
        let url = self.subscription_url(account, subscription, &["deliveries"], &query)?;
        self.get(url).await
    }

    /// `GET …/subscriptions/{subscription}/deliveries/{change}/attempts`
    pub async fn list_attempts(
        &self,
        account: &str,
        subscription: &str,
        change: &str,
    ) -> Result<Value> {
        let url = self.subscription_url(
            account,
            subscription,
            &["deliveries", change, "attempts"],
            &[],
        )?;
        self.get(url).await
    }

    /// `GET …/accounts/{account}/audit`: the account's whole audit history.
    pub async fn list_account_audit(&self, account: &str, page: &Page<'_>) -> Result<Value> {
        self.get(self.account_url(account, &["audit"], &page.query())?)
            .await
    }

    /// `GET …/accounts/{account}/audit/verify`: the walk of the account's audit hash chain.
    pub async fn verify_audit(&self, account: &str, anchor: Option<&str>) -> Result<Value> {
        let query = [("anchor", anchor.map(str::to_owned))];
        self.get(self.account_url(account, &["audit", "verify"], &query)?)
            .await
    }

    /// `GET …/subscriptions/{subscription}/audit`
    pub async fn list_subscription_audit(
        &self,
        account: &str,
        subscription: &str,
        page: &Page<'_>,
    ) -> Result<Value> {
        let url = self.subscription_url(account, subscription, &["audit"], &page.query())?;
        self.get(url).await
    }

    /// `operator/accounts/{account}/{rest…}` under the base URL.
    fn account_url(
        &self,
        account: &str,
        rest: &[&str],
        query: &[(&str, Option<String>)],
    ) -> Result<Url> {
        let segments: Vec<&str> = ["operator", "accounts", account]
            .into_iter()
            .chain(rest.iter().copied())
            .collect();
        self.url(&segments, query)
    }

    /// `operator/accounts/{account}/subscriptions/{subscription}/{rest…}` under the base URL.
    fn subscription_url(
        &self,
        account: &str,
        subscription: &str,
        rest: &[&str],
        query: &[(&str, Option<String>)],
    ) -> Result<Url> {
        let segments: Vec<&str> = ["subscriptions", subscription]
            .into_iter()
            .chain(rest.iter().copied())
            .collect();
        self.account_url(account, &segments, query)
    }

    /// The URL of path segments (each percent-encoded) and query pairs (absent ones left out).
    fn url(&self, segments: &[&str], query: &[(&str, Option<String>)]) -> Result<Url> {
        let mut url = self.base.clone();
        {
            let mut path = url
                .path_segments_mut()
                .map_err(|_| anyhow!("--api-url cannot have a path"))?;
            path.pop_if_empty();
            path.extend(segments);
        }
        let pairs: Vec<(&str, &String)> = query
            .iter()
            .filter_map(|(k, v)| v.as_ref().map(|v| (*k, v)))
            .collect();
        if !pairs.is_empty() {
            url.query_pairs_mut().extend_pairs(pairs);
        }
        Ok(url)
    }

    async fn get(&self, url: Url) -> Result<Value> {
        self.send(Method::GET, url, None).await
    }

    async fn post(&self, url: Url, body: Value) -> Result<Value> {
        self.send(Method::POST, url, Some(body)).await
    }

    async fn send(&self, method: Method, url: Url, body: Option<Value>) -> Result<Value> {
        let mut request = self
            .http
            .request(method, url.clone())
            .bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request
            .send()
            .await
            .with_context(|| format!("calling {url}"))?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        let answer: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        if status.is_success() {
            return Ok(answer);
        }
        Err(Refusal::from_answer(status.as_u16(), &answer).into())
    }
}

impl DeliveryFilter<'_> {
    fn query(&self) -> [(&'static str, Option<String>); 3] {
        let owned = |v: Option<&str>| v.map(str::to_owned);
        [
            ("status", owned(self.statuses)),
            ("from", owned(self.from)),
            ("to", owned(self.to)),
        ]
    }
}

impl Page<'_> {
    fn query(&self) -> [(&'static str, Option<String>); 2] {
        [
            ("limit", self.limit.map(|l| l.to_string())),
            ("cursor", self.cursor.map(str::to_owned)),
        ]
    }
}

impl Refusal {
    /// Reads the answer to a failed request leniently: one that is no problem document (a
    /// gateway's error page, say) still refuses, with the whole answer as its detail.
    fn from_answer(status: u16, answer: &Value) -> Self {
        let text = |v: &Value| v.as_str().unwrap_or("?").to_owned();
        Refusal {
            status,
            title: answer["title"]
                .as_str()
                .unwrap_or("Request failed")
                .to_owned(),
            detail: answer["detail"]
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| answer.to_string()),
            invalid_fields: answer["errors"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|e| InvalidField {
                    field: text(&e["field"]),
                    message: text(&e["message"]),
                })
                .collect(),
        }
    }
}

/// For people: title, status, detail and each invalid field on a line of its own.
impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}", self.title, self.status, self.detail)?;
        for e in &self.invalid_fields {
            write!(f, "\n  {}: {}", e.field, e.message)?;
        }
        Ok(())
    }
}

impl std::error::Error for Refusal {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_encode_each_segment_and_skip_absent_query_values() {
        let c = Client::new("http://127.0.0.1:9/prod", "t".into()).unwrap();
        let url = c
            .url(
                &["operator", "accounts", "a b", "replays"],
                &[("subscription_id", None), ("limit", Some("5".into()))],
            )
            .unwrap();
        assert_eq!(
            url.as_str(),
            "http://127.0.0.1:9/prod/operator/accounts/a%20b/replays?limit=5"
        );
        assert!(Client::new("ftp://x", "t".into()).is_err());
    }

    #[test]
    fn routes_nest_under_the_account_and_subscription() {
        let c = Client::new("http://127.0.0.1:9", "t".into()).unwrap();
        let url = c
            .subscription_url("a", "s/1", &["deliveries", "c", "retry"], &[])
            .unwrap();
        assert_eq!(
            url.as_str(),
            "http://127.0.0.1:9/operator/accounts/a/subscriptions/s%2F1/deliveries/c/retry"
        );
    }

    #[test]
    fn problems_are_printed_with_their_fields() {
        let refusal = Refusal::from_answer(
            422,
            &json!({"title": "Validation failed", "detail": "to: too long", "errors": [{"field": "to", "message": "too long"}]}),
        );
        assert_eq!(
            refusal.to_string(),
            "Validation failed (422): to: too long\n  to: too long"
        );
    }

    #[test]
    fn an_answer_that_is_no_problem_document_is_its_own_detail() {
        let refusal = Refusal::from_answer(502, &Value::String("Bad gateway".into()));
        assert_eq!(refusal.to_string(), "Request failed (502): \"Bad gateway\"");
    }
}
