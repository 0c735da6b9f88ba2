//! The printer's `rnx token` and `rnx console` results, and their views
//! (what `--json` prints). A token's secret appears only in
//! [`NewTokenView`], once.

use std::io::{self, Write};

use joblet_proto::pb;
use serde::Serialize;

use super::{Format, Printer};
use crate::table;
use crate::view::rfc3339;

/// A token as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TokenView {
    pub id: String,
    pub name: String,
    pub role: String,
    pub created_by: String,
    pub created_at: String,
    /// `None`: never expires.
    pub expires_at: Option<String>,
    /// `None`: never used.
    pub last_used_at: Option<String>,
}

impl From<pb::ApiToken> for TokenView {
    fn from(t: pb::ApiToken) -> TokenView {
        let at = |ms: i64| (ms != 0).then(|| rfc3339(ms));
        TokenView {
            id: t.id,
            name: t.name,
            role: t.role,
            created_by: t.created_by,
            created_at: rfc3339(t.created_unix_ms),
            expires_at: at(t.expires_unix_ms),
            last_used_at: at(t.last_used_unix_ms),
        }
    }
}

/// A token just made, with its secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NewTokenView {
    pub token: Option<TokenView>,
    pub secret: String,
}

impl From<pb::CreateTokenResponse> for NewTokenView {
    fn from(r: pb::CreateTokenResponse) -> NewTokenView {
        NewTokenView {
            token: r.token.map(TokenView::from),
            secret: r.secret,
        }
    }
}

/// A console sign-in link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConsoleLinkView {
    pub url: String,
    pub name: String,
    pub role: String,
    pub expires_at: String,
}

impl From<pb::ConsoleLink> for ConsoleLinkView {
    fn from(l: pb::ConsoleLink) -> ConsoleLinkView {
        ConsoleLinkView {
            url: l.url,
            name: l.name,
            role: l.role,
            expires_at: rfc3339(l.expires_unix_ms),
        }
    }
}

impl<W: Write> Printer<W> {
    /// `token create`: the secret, once, and how to use it.
    pub fn token_created(&mut self, t: &NewTokenView) -> io::Result<()> {
        match self.format {
            Format::Json => self.json(t),
            Format::Human => {
                let o = &mut self.out;
                if let Some(info) = &t.token {
                    writeln!(
                        o,
                        "Token {} (role {}, id {}), expires {}:",
                        info.name,
                        info.role,
                        info.id,
                        info.expires_at.as_deref().unwrap_or("never")
                    )?;
                }
                writeln!(o, "{}", t.secret)?;
                writeln!(
                    o,
                    "It is shown this once; send it as `Authorization: Bearer TOKEN` to the REST API."
                )?;
                o.flush()
            }
        }
    }

    /// `token list`: a table (never secrets), or the views as JSON.
    pub fn token_list(&mut self, tokens: &[TokenView]) -> io::Result<()> {
        match self.format {
            Format::Json => self.json(tokens),
            Format::Human => {
                if tokens.is_empty() {
                    writeln!(
                        self.out,
                        "No tokens. Make one with `rnx token create --name NAME --role viewer`."
                    )?;
                    return self.out.flush();
                }
                let rows: Vec<Vec<String>> = tokens
                    .iter()
                    .map(|k| {
                        vec![
                            k.name.clone(),
                            k.role.clone(),
                            k.id.clone(),
                            k.created_by.clone(),
                            k.created_at.clone(),
                            k.expires_at.clone().unwrap_or_else(|| "never".into()),
                            k.last_used_at.clone().unwrap_or_else(|| "-".into()),
                        ]
                    })
                    .collect();
                table::write(
                    &mut self.out,
                    &[
                        "NAME",
                        "ROLE",
                        "ID",
                        "CREATED BY",
                        "CREATED",
                        "EXPIRES",
                        "LAST USED",
                    ],
                    &rows,
                )?;
                self.out.flush()
            }
        }
    }

    /// `token revoke`.
    pub fn token_revoked(&mut self, t: &TokenView) -> io::Result<()> {
        match self.format {
            Format::Json => self.json(t),
            Format::Human => {
                writeln!(self.out, "Token {} ({}) revoked", t.name, t.id)?;
                self.out.flush()
            }
        }
    }

    /// `console`: the link.
    pub fn console_link(&mut self, l: &ConsoleLinkView) -> io::Result<()> {
        match self.format {
            Format::Json => self.json(l),
            Format::Human => {
                writeln!(self.out, "{}", l.url)?;
                writeln!(
                    self.out,
                    "Open it within 5 minutes (it works once) to sign in as {} ({}).",
                    l.name, l.role
                )?;
                self.out.flush()
            }
        }
    }
}
