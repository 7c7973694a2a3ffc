//! The HTTP API on loopback, for the demo and the CLI: the same app (the JSON API and the console) the `api` Lambda serves,
//! on a real TCP listener.

use anyhow::{bail, Context as _, Result};
use shared::web::ApiState;
use std::net::SocketAddr;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// Serves the API on `addr` (a loopback address; port 0 picks a free port). Returns the address
/// it listens on and the server task (abort it to stop the server).
/// What the api function serves (as `functions/api` composes it): the JSON API's routes and the
/// console's pages, with the fallbacks, body limit and request log every request passes.
pub fn app(state: ApiState) -> axum::Router {
    shared::web::app(state, shared::api::routes().merge(console::router()))
}

pub async fn serve(state: ApiState, addr: SocketAddr) -> Result<(SocketAddr, JoinHandle<()>)> {
    if !addr.ip().is_loopback() {
        bail!("the local API server listens on loopback only, not {addr}");
    }
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding the local API server to {addr}"))?;
    let bound = listener.local_addr()?;
    let app = app(state);
    let handle = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "the local API server stopped");
        }
    });
    tracing::info!(%bound, "local API server listening");
    Ok((bound, handle))
}

/// [`serve`] on `127.0.0.1` with a free port.
pub async fn serve_loopback(state: ApiState) -> Result<(SocketAddr, JoinHandle<()>)> {
    serve(state, SocketAddr::from(([127, 0, 0, 1], 0))).await
}
