//! The OpenAPI 3 document's frame: title, security schemes, tags and the
//! shared error schema. The paths and their schemas come from the
//! handlers' `#[utoipa::path]` attributes as [`super::api`] routes them,
//! so the document served at `/api/v1/openapi.json` is the code's.

use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::SecurityRequirement;
use utoipa::{Modify, OpenApi};

use super::error::{ErrorBody, ErrorDetail};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Joblet REST API",
        description = "Everything `rnx` does, over HTTPS. Authenticate with an API token (`Authorization: Bearer jbt_…`, from `rnx token create`), a console session (cookie `joblet_session`, from `rnx console`; changes need the `X-Joblet-CSRF` header), or a client certificate signed by the node's CA. Errors are `{\"error\": {\"code\", \"message\", \"field\"?}}`.",
        license(name = "Apache-2.0"),
    ),
    components(schemas(ErrorBody, ErrorDetail)),
    modifiers(&Security),
    tags(
        (name = "jobs", description = "Run, list, inspect, stop and delete jobs; their output"),
        (name = "gpus", description = "The node's GPUs and the GPU audit log"),
        (name = "workflows", description = "Workflow runs"),
        (name = "volumes", description = "Named volumes"),
        (name = "runtimes", description = "Runtimes"),
        (name = "nodes", description = "The cluster's nodes"),
        (name = "history", description = "GPU readings over time, GPU-hours, queue waits and failures (the web console's charts)"),
        (name = "session", description = "Who is calling; console sign-in"),
    )
)]
pub struct ApiDoc;

/// Bearer tokens and the console's session cookie, required by every
/// operation that does not say otherwise.
struct Security;

impl Modify for Security {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("An API token from `rnx token create`"))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "session",
            SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::with_description(
                super::auth::SESSION_COOKIE,
                "A console session from /console/login (`rnx console`)",
            ))),
        );
        openapi.security = Some(vec![
            SecurityRequirement::new("token", Vec::<String>::new()),
            SecurityRequirement::new("session", Vec::<String>::new()),
        ]);
    }
}
