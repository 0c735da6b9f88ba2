//! The mutual-TLS listener: accepts TCP connections, completes the TLS 1.3
//! handshake (client certificate required, checked against our CA by
//! rustls), and hands tonic a stream that carries the caller's identity.
//!
//! Handshakes run in their own tasks so a slow or hostile client cannot
//! stall accepting others; failed handshakes are logged and dropped.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use joblet_pki::Identity;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream, UnixStream};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::Connected;

use crate::service::IdentityError;

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Who is on the other end of a connection. `identity` is an error when the
/// certificate chains to our CA but lacks a usable name or role (or, on the
/// local socket, when the peer is not root).
#[derive(Debug, Clone)]
pub struct PeerInfo {
    /// `ip:port`, or `local uid N` on the local socket.
    pub peer: String,
    pub identity: Result<Identity, IdentityError>,
}

/// A connection that tells tonic who the peer is (request extension
/// `PeerInfo`): a mutual-TLS stream, or one of the local socket
/// ([`crate::local`]).
pub struct PeerStream {
    inner: Transport,
    info: PeerInfo,
}

enum Transport {
    Tls(Box<TlsStream<TcpStream>>),
    Local(UnixStream),
}

impl PeerStream {
    /// A local-socket connection whose peer is described by `info`.
    pub(crate) fn local(stream: UnixStream, info: PeerInfo) -> PeerStream {
        PeerStream {
            inner: Transport::Local(stream),
            info,
        }
    }
}

impl PeerStream {
    /// Whichever transport this connection runs over.
    fn io(&mut self) -> Pin<&mut dyn IoStream> {
        match &mut self.inner {
            Transport::Tls(t) => Pin::new(t.as_mut()),
            Transport::Local(u) => Pin::new(u),
        }
    }
}

trait IoStream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> IoStream for T {}

impl Connected for PeerStream {
    type ConnectInfo = PeerInfo;
    fn connect_info(&self) -> PeerInfo {
        self.info.clone()
    }
}

impl AsyncRead for PeerStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.io().poll_read(cx, buf)
    }
}

impl AsyncWrite for PeerStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.io().poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.io().poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.io().poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.io().poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        match &self.inner {
            Transport::Tls(t) => t.is_write_vectored(),
            Transport::Local(u) => u.is_write_vectored(),
        }
    }
}

/// Accepts connections on `listener` forever; yields authenticated streams.
pub fn incoming(
    listener: TcpListener,
    config: Arc<rustls::ServerConfig>,
) -> ReceiverStream<Result<PeerStream, io::Error>> {
    let (tx, rx) = mpsc::channel(128);
    accept_tls(listener, config, "gRPC", move |tls, addr, identity| {
        let tx = tx.clone();
        async move {
            let identity = identity.unwrap_or(Err(IdentityError::NoCertificate));
            if let Err(e) = &identity {
                tracing::warn!(peer = %addr, error = %e, "client certificate lacks a usable identity");
            }
            let _ = tx
                .send(Ok(PeerStream {
                    inner: Transport::Tls(Box::new(tls)),
                    info: PeerInfo {
                        peer: addr.to_string(),
                        identity,
                    },
                }))
                .await;
        }
    });
    ReceiverStream::new(rx)
}

/// The identity of a completed handshake's client certificate: `None`
/// without one, an error when it lacks a usable name or role.
pub type PeerIdentity = Option<Result<Identity, IdentityError>>;

/// Accepts TCP connections on `listener` forever (in a task), each TLS
/// handshake in a task of its own under a time limit, so a slow client
/// cannot stall the others; `done` gets every completed stream with its
/// peer's address and certificate identity. `what` names the listener in
/// the log lines of failed accepts and handshakes. Serves the gRPC
/// listener ([`incoming`]) and the REST one (`crate::rest::tls`).
pub fn accept_tls<F, Fut>(
    listener: TcpListener,
    config: Arc<rustls::ServerConfig>,
    what: &'static str,
    done: F,
) where
    F: Fn(TlsStream<TcpStream>, std::net::SocketAddr, PeerIdentity) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let acceptor = TlsAcceptor::from(config);
    let done = Arc::new(done);
    tokio::spawn(async move {
        loop {
            let (tcp, addr) = match listener.accept().await {
                Ok(c) => c,
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!(listener = what, error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = tcp.set_nodelay(true);
            let (acceptor, done) = (acceptor.clone(), done.clone());
            tokio::spawn(async move {
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                    Ok(Ok(tls)) => {
                        let identity = tls.get_ref().1.peer_certificates().and_then(|c| {
                            c.first().map(|leaf| {
                                joblet_pki::identity_from_der(leaf.as_ref())
                                    .map_err(|e| IdentityError::Certificate(Arc::new(e)))
                            })
                        });
                        done(tls, addr, identity).await;
                    }
                    Ok(Err(e)) => {
                        tracing::warn!(listener = what, peer = %addr, error = %e, "TLS handshake refused")
                    }
                    Err(_) => {
                        tracing::warn!(listener = what, peer = %addr, "TLS handshake timed out")
                    }
                }
            });
        }
    });
}
