//! Checks of a [`Config`] that need domain code.
//!
//! `config.rs` is a leaf (it imports nothing from the crate), so what only
//! the domain can judge is checked here: the scope's host patterns and
//! regexes compile, and `[dedup] near_distance` is within what the
//! near-duplicate index can search. Every entry point that loads a config
//! runs these before starting anything, so a bad regex is one clear error
//! at start rather than a failure deep inside a running node.

use std::path::{Path, PathBuf};

use crate::config::{Config, ConfigError};
use crate::dedup::NearIndex;
use crate::url::Scope;

/// The year the scope's calendar check is compiled for when only checking:
/// the patterns' validity does not depend on it.
const ANY_YEAR: i32 = 2000;

/// Checks what `Config::load` cannot check without domain code.
pub fn domain(config: &Config) -> Result<(), ConfigError> {
    if config.dedup.near_distance > NearIndex::MAX_DISTANCE {
        return Err(ConfigError::Invalid(format!(
            "dedup.near_distance must be at most {}",
            NearIndex::MAX_DISTANCE
        )));
    }
    Scope::new(&config.scope, &config.traps, ANY_YEAR)
        .map_err(|e| ConfigError::Invalid(e.to_string()))?;
    check_upload(config)?;
    check_state(config)
}

/// `[cluster] state_url` and `state_options` build a store (no request).
fn check_state(config: &Config) -> Result<(), ConfigError> {
    let c = &config.cluster;
    if !c.enabled || c.state_url.is_empty() {
        return Ok(());
    }
    crate::cluster::chain::StateStore::open(&c.state_url, &c.state_options)
        .map(drop)
        .map_err(|err| ConfigError::Key {
            key: err.key(),
            message: err.to_string(),
        })
}

/// `[upload] url` and `options` build a store (no request is made).
fn check_upload(config: &Config) -> Result<(), ConfigError> {
    let u = &config.upload;
    if !u.enabled {
        return Ok(());
    }
    crate::upload::Target::open(&u.url, &u.options, u.retries)
        .map(drop)
        .map_err(|err| ConfigError::Key {
            key: err.key(),
            message: err.to_string(),
        })
}

/// [`Config::load`] followed by [`domain`]: what the command line uses.
pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
    let config = Config::load(path)?;
    domain(&config)?;
    Ok(config)
}

/// [`Config::load_files`] followed by [`domain`].
pub fn load_files(paths: &[PathBuf]) -> Result<Config, ConfigError> {
    let config = Config::load_files(paths)?;
    domain(&config)?;
    Ok(config)
}

/// [`Config::from_layers`] followed by [`domain`].
pub fn from_layers(layers: &[(String, String)]) -> Result<Config, ConfigError> {
    let config = Config::from_layers(layers)?;
    domain(&config)?;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(text: &str) -> Result<Config, ConfigError> {
        from_layers(&[("test".into(), text.into())])
    }

    #[test]
    fn the_defaults_pass() {
        domain(&Config::defaults()).unwrap();
    }

    #[test]
    fn a_bad_scope_regex_is_named() {
        let text = "[scope]\ndeny_patterns = [\"(unclosed\"]\n";
        // The config alone parses: only the domain knows regexes.
        Config::from_layers(&[("test".into(), text.into())]).unwrap();
        let err = layer(text).unwrap_err();
        assert!(matches!(err, ConfigError::Invalid(_)), "{err:?}");
        assert!(err.to_string().contains("scope.deny_patterns"), "{err}");
    }

    #[test]
    fn upload_url_and_options_are_checked_when_enabled() {
        layer("[upload]\nurl = \"ftp://nowhere\"\n").unwrap();
        let err = layer("[upload]\nenabled = true\nurl = \"ftp://nowhere\"\n").unwrap_err();
        assert!(
            matches!(&err, ConfigError::Key { key, .. } if key == "upload.url"),
            "{err:?}"
        );
        let err = layer("[upload]\nenabled = true\n").unwrap_err();
        assert!(
            matches!(&err, ConfigError::Key { key, .. } if key == "upload.url"),
            "{err:?}"
        );
        let typo = "[upload]\nenabled = true\nurl = \"s3://b/p\"\n\
                    options = { aws_endpiont = \"http://127.0.0.1:9\" }\n";
        let err = layer(typo).unwrap_err();
        assert!(
            matches!(&err, ConfigError::Key { key, .. } if key == "upload.options.aws_endpiont"),
            "{err:?}"
        );
        let good = "[upload]\nenabled = true\nurl = \"s3://b/p\"\n\
                    options = { aws_endpoint = \"http://127.0.0.1:9\", aws_region = \"x\" }\n";
        layer(good).unwrap();
        let err = layer("[upload]\nconcurrency = 0\n").unwrap_err();
        assert!(err.to_string().contains("upload.concurrency"), "{err}");
        let err = layer("[upload]\nverify = \"md5\"\n").unwrap_err();
        assert!(
            matches!(&err, ConfigError::Key { key, .. } if key == "upload.verify"),
            "{err:?}"
        );
    }

    #[test]
    fn near_distance_past_the_index_limit_is_refused() {
        let err = layer("[dedup]\nnear_distance = 4\n").unwrap_err();
        assert!(err.to_string().contains("dedup.near_distance"), "{err}");
        layer("[dedup]\nnear_distance = 3\n").unwrap();
    }
}
