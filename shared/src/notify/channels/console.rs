//! The console (in-app) channel. Console deliveries are created `delivered` by the fan-out (the
//! delivery item *is* the console store, listed through the `inbox` index), so the worker never
//! sends one; the adapter exists so that the channel is known and answers like the others.

use super::{ChannelAdapter, ChannelAnswer, OutgoingMessage};
use crate::domain::time::Timestamp;
use crate::store::console_inbox::console_ref;

pub(crate) struct ConsoleAdapter;

#[async_trait::async_trait]
impl ChannelAdapter for ConsoleAdapter {
    fn provider(&self) -> &'static str {
        "console"
    }

    async fn send(&self, message: &OutgoingMessage<'_>, _now: Timestamp) -> ChannelAnswer {
        ChannelAnswer::Accepted {
            provider_ref: console_ref(message.notice_id, message.delivery_key),
            confirmed: true,
        }
    }
}
