//! Where the gateway's announcements to one client go — list changes and resource updates —
//! and how each is sent: on a session's connection, or on one 2026-07-28 `subscriptions/listen`
//! stream. Shared by the relay of the servers' offers (`offers`) and the exposed-tools
//! announcer (`exposed`), so neither depends on the other.

use rmcp::model::ResourceUpdatedNotificationParam;
use rmcp::service::{ServiceError, SubscriptionSendError, SubscriptionSink};
use rmcp::{Peer, RoleServer};

/// Where announcements go: a session's client (stdio, a 2025-11-25 session), or one
/// 2026-07-28 `subscriptions/listen` stream (which sends only what the client accepted).
#[derive(Clone)]
pub(super) enum Out {
    Peer(Peer<RoleServer>),
    Listen(SubscriptionSink),
}

/// One announcement the gateway sends.
#[derive(Debug, Clone, Copy)]
pub(super) enum Changed {
    Tools,
    Prompts,
    Resources,
}

/// Why an announcement did not reach its client.
#[derive(Debug, thiserror::Error)]
enum NotSent {
    #[error(transparent)]
    Session(#[from] ServiceError),
    #[error(transparent)]
    Listen(#[from] SubscriptionSendError),
}

impl Out {
    /// Send `notifications/<kind>/list_changed`; whether the client can still be reached.
    pub(super) async fn list_changed(&self, kind: Changed) -> bool {
        let sent = match self {
            Self::Peer(peer) => match kind {
                Changed::Tools => peer.notify_tool_list_changed().await,
                Changed::Prompts => peer.notify_prompt_list_changed().await,
                Changed::Resources => peer.notify_resource_list_changed().await,
            }
            .map_err(NotSent::from),
            Self::Listen(sink) => match kind {
                Changed::Tools => sink.notify_tool_list_changed().await,
                Changed::Prompts => sink.notify_prompt_list_changed().await,
                Changed::Resources => sink.notify_resource_list_changed().await,
            }
            .map_err(NotSent::from),
        };
        self.delivered(sent, "list_changed")
    }

    /// Send `notifications/resources/updated` for `uri`; whether the client can still be
    /// reached.
    pub(super) async fn resource_updated(&self, uri: String) -> bool {
        let sent = match self {
            Self::Peer(peer) => peer
                .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                .await
                .map_err(NotSent::from),
            Self::Listen(sink) => sink.notify_resource_updated(uri).await.map_err(NotSent::from),
        };
        self.delivered(sent, "resources/updated")
    }

    fn delivered(&self, sent: Result<(), NotSent>, what: &str) -> bool {
        match sent {
            Ok(()) => true,
            Err(error) => {
                tracing::debug!(%error, "{what} not sent");
                !self.is_closed()
            }
        }
    }

    /// Whether the client is gone for good (a listen stream's relay ends with the stream).
    fn is_closed(&self) -> bool {
        match self {
            Self::Peer(peer) => peer.is_transport_closed(),
            Self::Listen(_) => false,
        }
    }
}
