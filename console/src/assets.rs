//! The console's static files, embedded in the binary and served under content-hashed names
//! (`/console/assets/console.3f2a9c1d.css`), so a response can be cached for a year
//! (`immutable`): a changed file gets a new name. Nothing is fetched at build or run time; htmx
//! is vendored from its npm package (`htmx.org` 2.0.11, `dist/htmx.min.js`, licence beside it).

use axum::extract::Path;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use std::sync::LazyLock;

/// One embedded file.
pub struct Asset {
    /// The hashed name it is served under.
    pub name: String,
    pub content_type: &'static str,
    pub bytes: &'static [u8],
}

const FILES: &[(&str, &str, &[u8])] = &[
    (
        "console.css",
        "text/css; charset=utf-8",
        include_bytes!("assets/console.css"),
    ),
    (
        "console.js",
        "text/javascript; charset=utf-8",
        include_bytes!("assets/console.js"),
    ),
    (
        "htmx.min.js",
        "text/javascript; charset=utf-8",
        include_bytes!("assets/htmx.min.js"),
    ),
    (
        "htmx.LICENSE.txt",
        "text/plain; charset=utf-8",
        include_bytes!("assets/htmx.LICENSE"),
    ),
];

static ASSETS: LazyLock<Vec<(&'static str, Asset)>> = LazyLock::new(|| {
    FILES
        .iter()
        .map(|(file, content_type, bytes)| {
            let digest = Sha256::digest(bytes);
            let hash: String = digest[..5].iter().map(|b| format!("{b:02x}")).collect();
            let name = match file.rsplit_once('.') {
                Some((stem, ext)) => format!("{stem}.{hash}.{ext}"),
                None => format!("{file}.{hash}"),
            };
            (
                *file,
                Asset {
                    name,
                    content_type,
                    bytes,
                },
            )
        })
        .collect()
});

/// The path (under the console's base) of an embedded file, by its source name.
pub fn path(file: &str) -> String {
    let name = ASSETS
        .iter()
        .find(|(f, _)| *f == file)
        .map(|(_, a)| a.name.as_str())
        .unwrap_or(file);
    format!("/console/assets/{name}")
}

/// `GET /console/assets/{name}`: an embedded file by its hashed name, cached for a year.
pub async fn serve(Path(name): Path<String>) -> Response {
    let Some((_, asset)) = ASSETS.iter().find(|(_, a)| a.name == name) else {
        return (StatusCode::NOT_FOUND, "no such asset").into_response();
    };
    let mut r = asset.bytes.into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=31536000, immutable"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_has_a_content_hashed_name() {
        let css = path("console.css");
        assert!(css.starts_with("/console/assets/console.") && css.ends_with(".css"));
        assert_eq!(css.len(), "/console/assets/console.0123456789.css".len());
        let names: Vec<_> = ASSETS.iter().map(|(_, a)| a.name.clone()).collect();
        assert_eq!(names.len(), FILES.len());
        assert!(names.iter().all(|n| n.matches('.').count() >= 2));
    }
}
