//! The opening lines every test shares: a throwaway redis-server, a connection to look at what
//! it holds, and a client of it.

use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::{Client, Settings};
use delayer_testkit::RedisServer;

/// A new redis-server (stopped when it is dropped), a connection to it, and a client of it with
/// default settings.
pub async fn start() -> (RedisServer, MultiplexedConnection, Client) {
    start_with(Settings::default()).await
}

/// As [`start`], the client with `settings`.
pub async fn start_with(settings: Settings) -> (RedisServer, MultiplexedConnection, Client) {
    let server = RedisServer::start();
    let redis = server.connect().await;
    let client = Client::connect_with(server.info(), settings).await.unwrap();
    (server, redis, client)
}
