//! `TokenService`: the REST API's tokens and the web console's sign-in
//! links, minted, listed and revoked by admins.

use std::net::SocketAddr;

use joblet_proto::pb;
use joblet_proto::TokenService;
use tonic::{Request, Response, Status};

use super::caller;
use crate::service::tokens::TokenInfo;
use crate::service::Tokens;

/// The `TokenService` of one node.
pub struct TokenApi {
    tokens: Tokens,
    /// Where the REST API listens (`None`: `rest.enabled: false`).
    rest: Option<SocketAddr>,
}

impl TokenApi {
    pub fn new(tokens: Tokens, rest: Option<SocketAddr>) -> TokenApi {
        TokenApi { tokens, rest }
    }
}

fn token_pb(t: TokenInfo) -> pb::ApiToken {
    pb::ApiToken {
        id: t.id,
        name: t.name,
        role: t.role.to_string(),
        created_by: t.created_by,
        created_unix_ms: t.created_ms,
        expires_unix_ms: t.expires_ms.unwrap_or(0),
        last_used_unix_ms: t.last_used_ms.unwrap_or(0),
    }
}

#[tonic::async_trait]
impl TokenService for TokenApi {
    async fn create_token(
        &self,
        req: Request<pb::CreateTokenRequest>,
    ) -> Result<Response<pb::CreateTokenResponse>, Status> {
        let who = caller(&req)?;
        let r = req.get_ref();
        let new = self
            .tokens
            .create(&who, &r.name, &r.role, r.expires_seconds)?;
        Ok(Response::new(pb::CreateTokenResponse {
            token: Some(token_pb(new.info)),
            secret: new.secret,
        }))
    }

    async fn list_tokens(
        &self,
        req: Request<pb::ListTokensRequest>,
    ) -> Result<Response<pb::ListTokensResponse>, Status> {
        let tokens = self.tokens.list(&caller(&req)?)?;
        Ok(Response::new(pb::ListTokensResponse {
            tokens: tokens.into_iter().map(token_pb).collect(),
        }))
    }

    async fn revoke_token(
        &self,
        req: Request<pb::RevokeTokenRequest>,
    ) -> Result<Response<pb::ApiToken>, Status> {
        let who = caller(&req)?;
        let t = self.tokens.revoke(&who, &req.get_ref().token)?;
        Ok(Response::new(token_pb(t)))
    }

    async fn create_console_link(
        &self,
        req: Request<pb::CreateConsoleLinkRequest>,
    ) -> Result<Response<pb::ConsoleLink>, Status> {
        let who = caller(&req)?;
        let Some(rest) = self.rest else {
            return Err(Status::failed_precondition(
                "the REST API and web console are off on this node (rest.enabled: false); an admin can turn them on in joblet-config.yml and restart joblet",
            ));
        };
        let code = self.tokens.console_code(&who, &req.get_ref().role)?;
        Ok(Response::new(pb::ConsoleLink {
            url: crate::rest::login_url(rest, &crate::rest::host_name(), &code.code),
            code: code.code,
            name: code.caller.name,
            role: code.caller.role.to_string(),
            expires_unix_ms: code.expires_ms,
            rest_address: rest.to_string(),
        }))
    }
}
