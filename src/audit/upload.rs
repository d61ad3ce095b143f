//! Recordings to S3-compatible object storage (`[recordings] store =
//! "s3://bucket/prefix"`), so that they outlive the node that made them.
//!
//! Recordings are written to the local directory as ever (the spool). Each
//! one is uploaded when its session closes it, streamed in parts, to
//! `prefix/<file name>`; the object is then read back by size and a marker
//! beside the local file (`<file>.uploaded`) says where it went and with
//! which digest, the one its `session_end` holds. What fails is tried again
//! with a growing wait; at every start, and every few minutes, the spool is
//! scanned for what has no marker (a restart's, a full queue's, a session
//! quiet so long that its file so far is worth a copy: uploaded again at
//! its close). Local copies that are uploaded go after `[recordings]
//! keep_local_days`.
//!
//! What it owns: the bucket's client (object_store, credentials and
//! endpoint from the environment), uploads, markers, local retention, and
//! fetching an object back for `walissh play` and `audit verify`. What it
//! leaves to others: writing recordings (`recording`), their digests in
//! the chain (`db`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use object_store::aws::AmazonS3Builder;
use object_store::{ObjectStore, ObjectStoreExt};
use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;

/// Bytes read from the file and sent as one part (S3's least is 5 MiB).
const PART: usize = 8 << 20;
/// How often the spool is scanned for what has no marker.
const SCAN: Duration = Duration::from_secs(300);
/// A file left unchanged this long, without a marker, is uploaded as it
/// stands by the scan (a restart's; or a live session's so far).
const QUIET: Duration = Duration::from_secs(600);
/// The longest wait before an upload is tried again.
const MAX_BACKOFF: Duration = Duration::from_secs(600);
/// Closed recordings waiting for the uploader; past that, the scan finds
/// them.
const QUEUE: usize = 1024;

/// A bucket and the prefix recordings go under.
#[derive(Clone)]
pub(crate) struct Bucket {
    store: Arc<dyn ObjectStore>,
    prefix: String,
    /// `s3://bucket/prefix`, for messages and markers.
    pub(crate) url: String,
}

impl Bucket {
    /// The bucket `url` names (`s3://bucket[/prefix]`), its endpoint,
    /// region and credentials from the environment (`AWS_ENDPOINT_URL`,
    /// `AWS_REGION`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`;
    /// `AWS_ALLOW_HTTP=true` for an endpoint without TLS).
    pub(crate) fn new(url: &str) -> Result<Bucket, String> {
        let (bucket, prefix) = crate::config::bucket_and_prefix(url)
            .ok_or_else(|| format!("{url}: not s3://BUCKET/PREFIX"))?;
        let store = AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .build()
            .map_err(|e| format!("{url}: {e}"))?;
        Ok(Bucket {
            store: Arc::new(store),
            prefix: prefix.trim_matches('/').to_string(),
            url: url.to_string(),
        })
    }

    /// Where the recording named `name` goes.
    fn key(&self, name: &str) -> object_store::path::Path {
        match self.prefix.is_empty() {
            true => object_store::path::Path::from(name),
            false => object_store::path::Path::from(format!("{}/{name}", self.prefix)),
        }
    }

    /// Uploads `file`, streamed in parts; returns its SHA-256 and length
    /// as sent, once the object is there at that length.
    pub(crate) async fn upload(&self, file: &Path) -> Result<(String, u64), String> {
        let name = file_name(file)?;
        let err = |e: &dyn std::fmt::Display| format!("{}: {e}", file.display());
        let mut f = tokio::fs::File::open(file).await.map_err(|e| err(&e))?;
        let key = self.key(name);
        let upload = self.store.put_multipart(&key).await.map_err(|e| err(&e))?;
        let mut w = object_store::WriteMultipart::new_with_chunk_size(upload, PART);
        let (mut digest, mut len) = (Sha256::new(), 0u64);
        let mut buf = vec![0u8; PART];
        loop {
            let n = match f.read(&mut buf).await {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) => {
                    w.abort().await.ok();
                    return Err(err(&e));
                }
            };
            digest.update(&buf[..n]);
            len += n as u64;
            // At most two parts in flight: memory stays bounded.
            w.wait_for_capacity(2).await.map_err(|e| err(&e))?;
            w.write(&buf[..n]);
        }
        w.finish().await.map_err(|e| err(&e))?;
        let meta = self.store.head(&key).await.map_err(|e| err(&e))?;
        if meta.size != len {
            return Err(format!(
                "{}: the object is {} bytes, {len} were sent",
                file.display(),
                meta.size
            ));
        }
        Ok((super::chain::hex(&digest.finalize()), len))
    }

    /// Fetches the recording named `name` into `to`. Blocking callers use
    /// [`Bucket::fetch_blocking`].
    pub(crate) async fn fetch(&self, name: &str, to: &Path) -> Result<(), String> {
        let got = self
            .store
            .get(&self.key(name))
            .await
            .map_err(|e| format!("{}/{name}: {e}", self.url))?;
        let bytes = got
            .bytes()
            .await
            .map_err(|e| format!("{}/{name}: {e}", self.url))?;
        tokio::fs::write(to, &bytes)
            .await
            .map_err(|e| format!("{}: {e}", to.display()))
    }

    /// [`Bucket::fetch`] from a thread outside any runtime (the CLI).
    pub(crate) fn fetch_blocking(&self, name: &str, to: &Path) -> Result<(), String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start a runtime: {e}"))?;
        rt.block_on(self.fetch(name, to))
    }
}

fn file_name(file: &Path) -> Result<&str, String> {
    file.file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| format!("{}: no file name", file.display()))
}

/// The marker beside an uploaded recording.
fn marker(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".uploaded");
    PathBuf::from(name)
}

/// Where closed recordings are handed to the uploader.
#[derive(Clone)]
pub(crate) struct Uploads(mpsc::Sender<PathBuf>);

impl Uploads {
    /// `file` is closed: upload it (or let the scan find it, when the
    /// queue is full).
    pub(crate) fn closed(&self, file: PathBuf) {
        let _ = self.0.try_send(file);
    }
}

/// Starts the uploader for `dir`, on a thread and runtime of its own (its
/// reading and hashing stay off the bastion's); it runs until every
/// [`Uploads`] handle is gone. What it had not uploaded then is found by
/// the next start's scan.
pub(crate) fn start(
    bucket: Bucket,
    dir: PathBuf,
    keep_local: Option<Duration>,
) -> Result<(Uploads, std::thread::JoinHandle<()>), String> {
    let (tx, mut rx) = mpsc::channel(QUEUE);
    let started = SystemTime::now();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the uploader: {e}"))?;
    let run = async move {
        let mut u = Uploader {
            bucket,
            dir,
            keep_local,
            retry: BTreeMap::new(),
        };
        // What a restart left: every file from before this start.
        u.scan(Some(started)).await;
        let mut next_scan = Instant::now() + SCAN;
        loop {
            let wake = u
                .retry
                .values()
                .map(|r| r.at)
                .min()
                .unwrap_or(next_scan)
                .min(next_scan);
            tokio::select! {
                file = rx.recv() => match file {
                    Some(file) => u.upload(file, 0).await,
                    None => break,
                },
                _ = tokio::time::sleep_until(wake.into()) => {
                    u.retry_due().await;
                    if Instant::now() >= next_scan {
                        u.scan(None).await;
                        next_scan = Instant::now() + SCAN;
                    }
                }
            }
        }
    };
    let thread = std::thread::Builder::new()
        .name("uploader".into())
        .spawn(move || rt.block_on(run))
        .map_err(|e| format!("cannot start the uploader: {e}"))?;
    Ok((Uploads(tx), thread))
}

struct Retry {
    at: Instant,
    tries: u32,
}

struct Uploader {
    bucket: Bucket,
    dir: PathBuf,
    keep_local: Option<Duration>,
    retry: BTreeMap<PathBuf, Retry>,
}

impl Uploader {
    async fn upload(&mut self, file: PathBuf, tries: u32) {
        self.retry.remove(&file);
        match self.bucket.upload(&file).await {
            Ok((sha256, bytes)) => {
                let text = format!(
                    "{}/{}\n{sha256} {bytes}\n",
                    self.bucket.url,
                    file_name(&file).unwrap_or("")
                );
                if let Err(e) = tokio::fs::write(marker(&file), text).await {
                    tracing::warn!(file = %file.display(), error = %e, "uploaded, but its marker is not written");
                }
                tracing::debug!(file = %file.display(), bytes, "recording uploaded");
            }
            Err(e) => {
                let wait = Duration::from_secs(5 << tries.min(7)).min(MAX_BACKOFF);
                tracing::error!(error = %e, retry_in_s = wait.as_secs(), "recording not uploaded; tried again");
                self.retry.insert(
                    file,
                    Retry {
                        at: Instant::now() + wait,
                        tries: tries + 1,
                    },
                );
            }
        }
    }

    async fn retry_due(&mut self) {
        let now = Instant::now();
        let due: Vec<(PathBuf, u32)> = self
            .retry
            .iter()
            .filter(|(_, r)| r.at <= now)
            .map(|(f, r)| (f.clone(), r.tries))
            .collect();
        for (file, tries) in due {
            self.upload(file, tries).await;
        }
    }

    /// Uploads the recordings without a marker that were last written
    /// before `before` (at start: every one), or that have been quiet for
    /// [`QUIET`]; deletes uploaded ones past `keep_local`.
    async fn scan(&mut self, before: Option<SystemTime>) {
        let (dir, keep) = (self.dir.clone(), self.keep_local);
        let found = tokio::task::spawn_blocking(move || spooled(&dir, keep)).await;
        let Ok(found) = found else { return };
        let now = SystemTime::now();
        for (file, modified) in found {
            let quiet = now.duration_since(modified).unwrap_or_default() >= QUIET;
            let old = before.is_some_and(|b| modified < b);
            if (quiet || old) && !self.retry.contains_key(&file) {
                self.upload(file, 0).await;
            }
        }
    }
}

/// The spool's recordings without a marker, with their last write;
/// deletes, first, those uploaded and last written before `keep`.
/// Blocking.
fn spooled(dir: &Path, keep: Option<Duration>) -> Vec<(PathBuf, SystemTime)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let now = SystemTime::now();
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let file = entry.path();
        if file.extension().is_none_or(|e| e != "cast") {
            continue;
        }
        let Ok(meta) = std::fs::symlink_metadata(&file) else {
            continue;
        };
        let Ok(modified) = meta.modified() else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        // A marker older than the file is a copy of it so far (a quiet
        // live session's): not its last.
        let uploaded = std::fs::metadata(marker(&file))
            .and_then(|m| m.modified())
            .is_ok_and(|m| m >= modified);
        let age = now.duration_since(modified).unwrap_or_default();
        match (uploaded, keep) {
            (true, Some(keep)) if age >= keep => {
                // Gone here, kept in the bucket; the marker goes last.
                if std::fs::remove_file(&file).is_ok() {
                    let _ = std::fs::remove_file(marker(&file));
                }
            }
            (true, _) => {}
            (false, _) => found.push((file, modified)),
        }
    }
    found
}
