//! `rnx token create|list|revoke` and `rnx console`: the REST API's tokens
//! and the web console's sign-in links, through TokenService.

use joblet_proto::pb;

use super::Ctx;
use crate::error::Error;
use crate::exit;
use crate::printer::token::{ConsoleLinkView, NewTokenView, TokenView};
use crate::printer::Printer;
use crate::settings::TokenAction;

pub async fn run(mut ctx: Ctx, action: TokenAction) -> Result<u8, Error> {
    let address = ctx.node.address.clone();
    let status_err = |s| Error::from_status(&address, s);
    let mut printer = Printer::new(ctx.format, std::io::stdout());
    match action {
        TokenAction::Create {
            name,
            role,
            expires_seconds,
        } => {
            let r = ctx
                .tokens
                .create_token(pb::CreateTokenRequest {
                    name,
                    role: role.to_owned(),
                    expires_seconds: expires_seconds.unwrap_or(0),
                })
                .await
                .map_err(status_err)?
                .into_inner();
            printer.token_created(&NewTokenView::from(r))
        }
        TokenAction::List => {
            let r = ctx
                .tokens
                .list_tokens(pb::ListTokensRequest {})
                .await
                .map_err(status_err)?
                .into_inner();
            let tokens: Vec<TokenView> = r.tokens.into_iter().map(TokenView::from).collect();
            printer.token_list(&tokens)
        }
        TokenAction::Revoke { token } => {
            let r = ctx
                .tokens
                .revoke_token(pb::RevokeTokenRequest { token })
                .await
                .map_err(status_err)?
                .into_inner();
            printer.token_revoked(&TokenView::from(r))
        }
    }
    .map_err(Error::Output)?;
    Ok(exit::SUCCESS)
}

pub async fn console(mut ctx: Ctx, role: Option<&'static str>) -> Result<u8, Error> {
    let address = ctx.node.address.clone();
    let r = ctx
        .tokens
        .create_console_link(pb::CreateConsoleLinkRequest {
            role: role.unwrap_or_default().to_owned(),
        })
        .await
        .map_err(|s| Error::from_status(&address, s))?
        .into_inner();
    Printer::new(ctx.format, std::io::stdout())
        .console_link(&ConsoleLinkView::from(r))
        .map_err(Error::Output)?;
    Ok(exit::SUCCESS)
}
