//! Where uploads go: an object store and the key prefix under it, built
//! from `[upload] url` and `options`.
//!
//! Why not `object_store::parse_url_opts`: it ignores option keys it does
//! not know (a typo such as `aws_endpiont` would silently send archives to
//! AWS proper) and reads no environment variables. This builds each store
//! from its environment (`AWS_*`, `GOOGLE_*`, `AZURE_*`, as object_store
//! defines them), then applies the options, refusing a key the store does
//! not know.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{BackoffConfig, ObjectStore, ObjectStoreScheme, RetryConfig};

/// How long object_store keeps retrying one request, at most.
const RETRY_TIMEOUT: Duration = Duration::from_secs(3 * 60);

/// Errors building a [`Target`]; `key` is the config key at fault.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// The URL does not parse or names no supported store.
    #[error("{key} {url:?}: {message}")]
    Url {
        key: &'static str,
        url: String,
        message: String,
    },
    /// An option is not one of the store's keys, or is set for a local
    /// directory (which takes none); `options` is the options' config key.
    #[error("{options}.{key}: {message}")]
    Option {
        options: &'static str,
        key: String,
        message: String,
    },
    /// The store refused its configuration.
    #[error("{key}: {source}")]
    Build {
        key: &'static str,
        source: object_store::Error,
    },
}

impl TargetError {
    /// The dotted config key this error is about.
    pub fn key(&self) -> String {
        match self {
            TargetError::Url { key, .. } => (*key).to_owned(),
            TargetError::Option { options, key, .. } => format!("{options}.{key}"),
            TargetError::Build { key, .. } => (*key).to_owned(),
        }
    }
}

/// An object store and the prefix objects are put under.
#[derive(Debug, Clone)]
pub struct Target {
    store: Arc<dyn ObjectStore>,
    prefix: Path,
    /// The URL as configured, without a trailing slash.
    url: String,
    /// Whether the store keeps user metadata (a local directory does not).
    keeps_metadata: bool,
}

impl Target {
    /// The store of `url` with `options`; one request is retried up to
    /// `retries` times with exponential backoff.
    pub fn open(
        url: &str,
        options: &BTreeMap<String, String>,
        retries: usize,
    ) -> Result<Self, TargetError> {
        Self::open_keyed(url, options, retries, ("upload.url", "upload.options"))
    }

    /// [`Target::open`] for a store configured under other keys (`keys`:
    /// the URL's and the options' config keys, which errors name).
    pub fn open_keyed(
        url: &str,
        options: &BTreeMap<String, String>,
        retries: usize,
        keys: (&'static str, &'static str),
    ) -> Result<Self, TargetError> {
        // reqwest is built without a crypto provider: use the fetcher's.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let (url_key, options_key) = keys;
        let bad_url = |message: String| TargetError::Url {
            key: url_key,
            url: url.to_owned(),
            message,
        };
        let build = |source| TargetError::Build {
            key: url_key,
            source,
        };
        let parsed = url::Url::parse(url).map_err(|e| bad_url(e.to_string()))?;
        let (scheme, prefix) =
            ObjectStoreScheme::parse(&parsed).map_err(|e| bad_url(e.to_string()))?;
        let retry = RetryConfig {
            backoff: BackoffConfig::default(),
            max_retries: retries,
            retry_timeout: RETRY_TIMEOUT,
        };
        let store: Arc<dyn ObjectStore> = match scheme {
            ObjectStoreScheme::AmazonS3 => {
                let b = AmazonS3Builder::from_env().with_url(url).with_retry(retry);
                let b = configure(
                    b,
                    options,
                    options_key,
                    |b, k, v| b.with_config(k, v),
                    AmazonS3ConfigKey::from_str,
                )?;
                Arc::new(b.build().map_err(build)?)
            }
            ObjectStoreScheme::GoogleCloudStorage => {
                let b = GoogleCloudStorageBuilder::from_env()
                    .with_url(url)
                    .with_retry(retry);
                let b = configure(
                    b,
                    options,
                    options_key,
                    |b, k, v| b.with_config(k, v),
                    GoogleConfigKey::from_str,
                )?;
                Arc::new(b.build().map_err(build)?)
            }
            ObjectStoreScheme::MicrosoftAzure => {
                let b = MicrosoftAzureBuilder::from_env()
                    .with_url(url)
                    .with_retry(retry);
                let b = configure(
                    b,
                    options,
                    options_key,
                    |b, k, v| b.with_config(k, v),
                    AzureConfigKey::from_str,
                )?;
                Arc::new(b.build().map_err(build)?)
            }
            ObjectStoreScheme::Local => {
                if let Some(key) = options.keys().next() {
                    return Err(TargetError::Option {
                        options: options_key,
                        key: key.clone(),
                        message: "a file:// url takes no options".into(),
                    });
                }
                Arc::new(LocalFileSystem::new())
            }
            other => {
                return Err(bad_url(format!(
                    "{other:?} is not a supported store (s3://, gs://, az://, file://)"
                )))
            }
        };
        let keeps_metadata = scheme != ObjectStoreScheme::Local;
        Ok(Target::new(store, prefix, url, keeps_metadata))
    }

    /// A target over an opened store (tests use an in-memory one).
    pub fn new(store: Arc<dyn ObjectStore>, prefix: Path, url: &str, keeps_metadata: bool) -> Self {
        Target {
            store,
            prefix,
            url: url.trim_end_matches('/').to_owned(),
            keeps_metadata,
        }
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// The prefix every key is under.
    pub fn prefix(&self) -> &Path {
        &self.prefix
    }

    /// The key of `file`'s object.
    pub fn key(&self, file: &str) -> Path {
        self.prefix.clone().join(file)
    }

    /// The URL of `file`'s object (`s3://bucket/prefix/file`).
    pub fn location(&self, file: &str) -> String {
        format!("{}/{file}", self.url)
    }

    /// Whether objects keep user metadata (the SHA-256 is stored there).
    pub fn keeps_metadata(&self) -> bool {
        self.keeps_metadata
    }

    /// Where `key` is on this machine's filesystem, for a `file://`
    /// target (whose store is rooted at `/`); `None` for any other.
    pub fn local_path(&self, key: &Path) -> Option<std::path::PathBuf> {
        let local = !self.keeps_metadata && self.url.starts_with("file:");
        local.then(|| std::path::Path::new("/").join(key.as_ref()))
    }
}

/// Applies `options` to a builder, refusing keys `parse` does not know.
fn configure<B, K>(
    builder: B,
    options: &BTreeMap<String, String>,
    options_key: &'static str,
    with: impl Fn(B, K, String) -> B,
    parse: impl Fn(&str) -> Result<K, object_store::Error>,
) -> Result<B, TargetError> {
    options.iter().try_fold(builder, |b, (key, value)| {
        let k = parse(&key.to_ascii_lowercase()).map_err(|_| TargetError::Option {
            options: options_key,
            key: key.clone(),
            message: "not an option of this store".into(),
        })?;
        Ok(with(b, k, value.clone()))
    })
}
