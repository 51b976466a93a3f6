//! A TCP proxy whose connections open so far can be made to go silent, as when a firewall or NAT
//! forgets them (their bytes are held back both ways and nothing is closed), or to lose only what
//! the server answers (requests still arrive and run). New connections pass.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub struct ForgetfulProxy {
    port: u16,
    /// Connections accepted before this generation are silent both ways.
    silent: Arc<AtomicU64>,
    /// Connections accepted before this generation lose their replies.
    deaf: Arc<AtomicU64>,
}

impl ForgetfulProxy {
    /// Listens on a free port of 127.0.0.1, forwarding to `upstream` there.
    pub async fn start(upstream: u16) -> ForgetfulProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (silent, deaf) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (now_silent, now_deaf) = (silent.clone(), deaf.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let born = (
                    now_silent.load(Ordering::SeqCst),
                    now_deaf.load(Ordering::SeqCst),
                );
                // An upstream that is down closes this connection, not the proxy.
                let Ok(server) = tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await
                else {
                    continue;
                };
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                let pipes = [
                    (client_read, server_write, false),
                    (server_read, client_write, true),
                ];
                for (mut from, mut to, replies) in pipes {
                    let (silent, deaf) = (now_silent.clone(), now_deaf.clone());
                    tokio::spawn(async move {
                        let mut buffer = [0; 4096];
                        while let Ok(read) = from.read(&mut buffer).await {
                            if read == 0 {
                                return;
                            }
                            let lost = silent.load(Ordering::SeqCst) > born.0
                                || replies && deaf.load(Ordering::SeqCst) > born.1;
                            if lost {
                                // Nothing more passes, and the connection is kept open.
                                std::future::pending::<()>().await;
                            }
                            if to.write_all(&buffer[..read]).await.is_err() {
                                return;
                            }
                        }
                    });
                }
            }
        });
        ForgetfulProxy { port, silent, deaf }
    }

    /// The URL that reaches Redis through the proxy.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The connections open now pass nothing more, either way.
    pub fn forget_open_connections(&self) {
        self.silent.fetch_add(1, Ordering::SeqCst);
    }

    /// The connections open now pass requests but no more replies.
    pub fn lose_replies_of_open_connections(&self) {
        self.deaf.fetch_add(1, Ordering::SeqCst);
    }
}
