//! Recordings to S3-compatible object storage (`[recordings] store =
//! "s3://bucket/prefix"`), so that they outlive the node that made them.
//!
//! Recordings are written to the local directory as ever (the spool).
//! While a session runs, what its recording gained is sent every
//! `[recordings] upload_every_s` as a part object of its own (`prefix/parts/<file name>/<offset>`),
//! so a node that dies loses at most that much of it. When the session
//! closes the file, the whole of it is uploaded, streamed in parts, to
//! `prefix/<file name>`, read back by size, and a marker beside the local
//! file (`<file>.uploaded`) says where it went and with which digest, the
//! one its `session_end` holds; its part objects are deleted then (a
//! bucket that refuses deletes keeps them, for its lifecycle rule). What
//! fails is tried again with a growing wait; at every start, and as
//! often as parts are sent, the spool is scanned for what has no marker (a restart's, a
//! full queue's, a session quiet so long that its file so far is worth a
//! copy: uploaded again at its close). Local copies that are uploaded go
//! after `[recordings] keep_local_days`. Reading a recording back takes
//! the whole object, or, where its parts reach further (a dead node's
//! session), the parts joined.
//!
//! What it owns: the bucket's client (object_store, credentials and
//! endpoint from the environment), uploads, markers, local retention, and
//! fetching an object back for `walissh play` and `audit verify`. What it
//! leaves to others: writing recordings (`recording`), their digests in
//! the chain (`db`).

use std::collections::{BTreeMap, HashMap};
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
/// A file left unchanged this long, without a marker, is uploaded as it
/// stands by the scan (a restart's; or a live session's so far).
const QUIET: Duration = Duration::from_secs(600);
/// The longest wait before an upload is tried again.
const MAX_BACKOFF: Duration = Duration::from_secs(600);
/// The most of a recording fetched without a length from the chain (a
/// live or reaped session's): a bucket cannot fill the disk it lands on.
pub(crate) const UNSEALED_MAX: u64 = 1 << 30;
/// Part objects of one recording listed at most (two days of a session's
/// parts sent every second; nine months' at the default 120 s).
const MAX_PARTS: usize = 200_000;
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
        // A checksum on every part: a bucket with an object lock takes no
        // upload without one.
        let store = AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .with_checksum_algorithm(object_store::aws::Checksum::SHA256)
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
            if let Err(e) = w.wait_for_capacity(2).await {
                w.abort().await.ok();
                return Err(err(&e));
            }
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

    /// Where the part of the recording `name` from byte `offset` goes:
    /// under `parts/`, so that one lifecycle rule can expire what a
    /// bucket would not let walissh delete.
    fn part_key(&self, name: &str, offset: u64) -> object_store::path::Path {
        self.key(&format!("parts/{name}/{offset:020}"))
    }

    /// Sends what `file` holds from byte `*from` on, as part objects of
    /// at most [`PART`] bytes each, moving `from` past each one sent.
    async fn upload_parts(&self, file: &Path, from: &mut u64) -> Result<(), String> {
        use tokio::io::AsyncSeekExt;
        let name = file_name(file)?;
        let err = |e: &dyn std::fmt::Display| format!("{}: {e}", file.display());
        let mut f = tokio::fs::File::open(file).await.map_err(|e| err(&e))?;
        f.seek(std::io::SeekFrom::Start(*from))
            .await
            .map_err(|e| err(&e))?;
        loop {
            let mut buf = Vec::with_capacity(PART.min(1 << 20));
            (&mut f)
                .take(PART as u64)
                .read_to_end(&mut buf)
                .await
                .map_err(|e| err(&e))?;
            if buf.is_empty() {
                return Ok(());
            }
            let n = buf.len() as u64;
            let key = self.part_key(name, *from);
            self.store
                .put(&key, buf.into())
                .await
                .map_err(|e| err(&e))?;
            *from += n;
        }
    }

    /// The part objects of the recording `name` that join up from byte 0,
    /// in order: each one's key, offset and size.
    async fn parts(&self, name: &str) -> Result<Vec<(object_store::path::Path, u64, u64)>, String> {
        use futures_util::StreamExt;
        let prefix = self.key(&format!("parts/{name}"));
        let mut listed = self.store.list(Some(&prefix));
        let mut found = Vec::new();
        while let Some(meta) = listed.next().await {
            let meta = meta.map_err(|e| format!("{}/parts/{name}: {e}", self.url))?;
            // Whoever can write the bucket could list without end: the
            // listing, held here, is bounded.
            if found.len() == MAX_PARTS {
                return Err(format!(
                    "{}/parts/{name}: more than {MAX_PARTS} parts",
                    self.url
                ));
            }
            let offset = meta.location.filename().and_then(|f| f.parse::<u64>().ok());
            if let Some(offset) = offset {
                found.push((meta.location, offset, meta.size));
            }
        }
        found.sort_by_key(|p| p.1);
        // Only the run that starts at 0 and has no gap: past a gap, the
        // bytes are not the recording's next ones.
        let mut end = 0;
        found.retain(|(_, offset, size)| {
            let joins = *offset == end;
            end += if joins { *size } else { 0 };
            joins
        });
        Ok(found)
    }

    /// Deletes the part objects of the recording `name` (its whole object
    /// is there): a bucket that refuses leaves them to its lifecycle rule.
    async fn drop_parts(&self, name: &str) {
        let Ok(parts) = self.parts(name).await else {
            return;
        };
        for (key, _, _) in parts {
            if let Err(e) = self.store.delete(&key).await {
                tracing::debug!(error = %e, "a recording's part not deleted");
                return;
            }
        }
    }

    /// Deletes the recording named `name` and its parts (retention; its
    /// row says so already). An object already gone counts as deleted.
    pub(crate) async fn delete(&self, name: &str) -> Result<(), String> {
        match self.store.delete(&self.key(name)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(format!("{}/{name}: {e}", self.url)),
        }
        self.drop_parts(name).await;
        Ok(())
    }

    /// Fetches the recording named `name` into `to`, streamed. `sealed`:
    /// its length in the chain, when the chain holds its digest; then only
    /// the whole object is the recording, and one longer is not read. Else
    /// (a live session's, or a dead node's, reaped): the whole object, or
    /// its parts joined where they reach further, never more than
    /// [`UNSEALED_MAX`]. Blocking callers use [`Bucket::fetch_blocking`].
    pub(crate) async fn fetch(
        &self,
        name: &str,
        to: &Path,
        sealed: Option<u64>,
    ) -> Result<(), Fetch> {
        let failed = |e: &dyn std::fmt::Display| Fetch::Failed(format!("{}/{name}: {e}", self.url));
        let whole = match self.store.head(&self.key(name)).await {
            Err(object_store::Error::NotFound { .. }) => None,
            Err(e) => return Err(failed(&e)),
            Ok(meta) => Some(meta.size),
        };
        let parts = match sealed {
            Some(_) => Vec::new(),
            None => self.parts(name).await.map_err(Fetch::Failed)?,
        };
        let joined: u64 = parts.iter().map(|p| p.2).sum();
        let size = match whole {
            Some(w) if w >= joined => w,
            _ if parts.is_empty() => {
                return Err(Fetch::Missing(format!(
                    "{}/{name}: no such object",
                    self.url
                )));
            }
            _ => joined,
        };
        if size > sealed.unwrap_or(UNSEALED_MAX) {
            let what = match sealed {
                Some(_) => "more than the chain says",
                None => "more than a recording is fetched",
            };
            return Err(Fetch::Missing(format!(
                "{}/{name}: {size} bytes, {what}",
                self.url
            )));
        }
        let mut f = tokio::fs::File::create(to).await.map_err(|e| failed(&e))?;
        // Never more than was sized up: an object changed since is not
        // read whole either.
        let mut budget = size;
        match whole {
            Some(w) if w == size => self.copy_to(&self.key(name), &mut f, &mut budget).await?,
            _ => {
                for (key, _, _) in &parts {
                    self.copy_to(key, &mut f, &mut budget).await?;
                }
            }
        }
        use tokio::io::AsyncWriteExt;
        f.flush().await.map_err(|e| failed(&e))
    }

    /// Streams the object at `key` onto the end of `f`, taking what it
    /// writes from `budget`: an object longer than that is refused.
    async fn copy_to(
        &self,
        key: &object_store::path::Path,
        f: &mut tokio::fs::File,
        budget: &mut u64,
    ) -> Result<(), Fetch> {
        use futures_util::StreamExt;
        use tokio::io::AsyncWriteExt;
        let failed = |e: &dyn std::fmt::Display| Fetch::Failed(format!("{key}: {e}"));
        let got = self.store.get(key).await.map_err(|e| match e {
            object_store::Error::NotFound { .. } => Fetch::Missing(format!("{key}: gone")),
            e => failed(&e),
        })?;
        let mut body = got.into_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| failed(&e))?;
            *budget = budget
                .checked_sub(chunk.len() as u64)
                .ok_or_else(|| Fetch::Missing(format!("{key}: changed while read")))?;
            f.write_all(&chunk).await.map_err(|e| failed(&e))?;
        }
        Ok(())
    }

    /// [`Bucket::fetch`] from a thread outside any runtime (the CLI).
    pub(crate) fn fetch_blocking(
        &self,
        name: &str,
        to: &Path,
        max: Option<u64>,
    ) -> Result<(), Fetch> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Fetch::Failed(format!("cannot start a runtime: {e}")))?;
        rt.block_on(self.fetch(name, to, max))
    }
}

/// Why a recording could not be fetched: it is not there (or not the
/// recording: longer than the chain says), or the store could not be
/// asked.
#[derive(Debug)]
pub(crate) enum Fetch {
    Missing(String),
    Failed(String),
}

impl std::fmt::Display for Fetch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fetch::Missing(e) | Fetch::Failed(e) => f.write_str(e),
        }
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

/// What a marker says: the object's digest and length, and whether it is
/// the recording's last state.
struct Marker {
    sha256: String,
    bytes: u64,
    last: bool,
}

impl Marker {
    fn text(&self, url: &str, name: &str) -> String {
        let state = if self.last { "last" } else { "so far" };
        format!("{url}/{name}\n{} {}\n{state}\n", self.sha256, self.bytes)
    }

    /// The marker at `path`, if it is one (a small regular file).
    fn read(path: &Path) -> Option<Marker> {
        let meta = std::fs::symlink_metadata(path).ok()?;
        if !meta.is_file() || meta.len() > 4096 {
            return None;
        }
        let text = std::fs::read_to_string(path).ok()?;
        let mut lines = text.lines().skip(1);
        let (sha256, bytes) = lines.next()?.split_once(' ')?;
        Some(Marker {
            sha256: sha256.to_string(),
            bytes: bytes.parse().ok()?,
            last: lines.next() == Some("last"),
        })
    }
}

/// Writes `text` to `path` afresh, never through a link someone left
/// there. Blocking.
fn write_new(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(0o600)
        .open(path)?;
    f.write_all(text.as_bytes())
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
    (keep_local, every): (Option<Duration>, Duration),
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
            sent: HashMap::new(),
        };
        // What a restart left: every file from before this start.
        u.scan(Some(started)).await;
        let mut next_scan = Instant::now() + every;
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
                    Some(file) => u.upload(file, (0, Last::Yes)).await,
                    None => break,
                },
                _ = tokio::time::sleep_until(wake.into()) => {
                    u.retry_due().await;
                    if Instant::now() >= next_scan {
                        u.scan(None).await;
                        next_scan = Instant::now() + every;
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
    last: Last,
}

/// Whether an upload is of a recording's last state (its session closed
/// it, or it is from before this start), or of its file so far (a quiet
/// live session's): only the last lets the local copy go.
#[derive(Clone, Copy, PartialEq)]
enum Last {
    Yes,
    SoFar,
}

struct Uploader {
    bucket: Bucket,
    dir: PathBuf,
    keep_local: Option<Duration>,
    retry: BTreeMap<PathBuf, Retry>,
    /// How much of each live recording its part objects hold.
    sent: HashMap<PathBuf, u64>,
}

impl Uploader {
    async fn upload(&mut self, file: PathBuf, (tries, last): (u32, Last)) {
        self.retry.remove(&file);
        match self.bucket.upload(&file).await {
            Ok((sha256, bytes)) => {
                let done = Marker {
                    sha256,
                    bytes,
                    last: last == Last::Yes,
                };
                let text = done.text(&self.bucket.url, file_name(&file).unwrap_or(""));
                let written = tokio::task::spawn_blocking({
                    let to = marker(&file);
                    move || write_new(&to, &text)
                })
                .await;
                if !matches!(written, Ok(Ok(()))) {
                    tracing::warn!(file = %file.display(), "uploaded, but its marker is not written");
                }
                // The whole is there: its parts are not needed any more.
                if last == Last::Yes {
                    self.sent.remove(&file);
                    self.bucket.drop_parts(file_name(&file).unwrap_or("")).await;
                }
                tracing::debug!(file = %file.display(), bytes, "recording uploaded");
            }
            // Gone (retention, by hand): nothing to try again.
            Err(e) if !file.exists() => {
                tracing::warn!(error = %e, "recording gone before it was uploaded");
            }
            Err(e) => {
                let wait = Duration::from_secs(5 << tries.min(7)).min(MAX_BACKOFF);
                tracing::error!(error = %e, retry_in_s = wait.as_secs(), "recording not uploaded; tried again");
                self.retry.insert(
                    file,
                    Retry {
                        at: Instant::now() + wait,
                        tries: tries + 1,
                        last,
                    },
                );
            }
        }
    }

    async fn retry_due(&mut self) {
        let now = Instant::now();
        let due: Vec<(PathBuf, (u32, Last))> = self
            .retry
            .iter()
            .filter(|(_, r)| r.at <= now)
            .map(|(f, r)| (f.clone(), (r.tries, r.last)))
            .collect();
        for (file, again) in due {
            self.upload(file, again).await;
        }
    }

    /// Uploads the recordings without a marker that were last written
    /// before `before` (at start: every one), or that have been quiet for
    /// [`QUIET`]; sends what the others gained as parts; deletes uploaded
    /// ones past `keep_local`.
    async fn scan(&mut self, before: Option<SystemTime>) {
        let (dir, keep) = (self.dir.clone(), self.keep_local);
        let found = tokio::task::spawn_blocking(move || spooled(&dir, keep)).await;
        let Ok(found) = found else { return };
        // Recordings gone (retention, by hand) are not tracked further.
        self.sent.retain(|f, _| f.exists());
        let now = SystemTime::now();
        for (file, modified, len) in found {
            if self.retry.contains_key(&file) {
                continue;
            }
            let quiet = now.duration_since(modified).unwrap_or_default() >= QUIET;
            let old = before.is_some_and(|b| modified < b);
            if quiet || old {
                let last = if old { Last::Yes } else { Last::SoFar };
                self.upload(file, (0, last)).await;
            } else if len > self.sent.get(&file).copied().unwrap_or(0) {
                self.send_parts(file).await;
            }
        }
    }

    /// Sends what the live recording `file` gained since its last part.
    async fn send_parts(&mut self, file: PathBuf) {
        let mut at = self.sent.get(&file).copied().unwrap_or(0);
        let sent = self.bucket.upload_parts(&file, &mut at).await;
        if let Err(e) = sent {
            tracing::warn!(error = %e, "a live recording's part not uploaded; tried at the next scan");
        }
        self.sent.insert(file, at);
    }
}

/// The spool's recordings without a marker, with their last write and
/// length; deletes, first, those uploaded and last written before `keep`.
/// Blocking.
fn spooled(dir: &Path, keep: Option<Duration>) -> Vec<(PathBuf, SystemTime, u64)> {
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
        // Uploaded at the length it has now; and as its last state (only
        // then may the local copy go: a quiet live session's file so far
        // is uploaded, and must stay).
        let done = Marker::read(&marker(&file)).filter(|m| m.bytes == meta.len());
        let uploaded = done.is_some();
        let last = done.is_some_and(|m| m.last);
        let age = now.duration_since(modified).unwrap_or_default();
        match (uploaded, keep) {
            (true, Some(keep)) if last && age >= keep => {
                // Gone here, kept in the bucket; the marker goes last.
                if std::fs::remove_file(&file).is_ok() {
                    let _ = std::fs::remove_file(marker(&file));
                }
            }
            (true, _) => {}
            (false, _) => found.push((file, modified, meta.len())),
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(file: &Path, bytes: u64, last: bool) {
        let m = Marker {
            sha256: "00".into(),
            bytes,
            last,
        };
        write_new(&marker(file), &m.text("s3://b/p", "x.cast")).unwrap();
    }

    /// Only a recording uploaded as its last state, at the length it has
    /// now, lets its local copy go; one uploaded so far (a quiet live
    /// session's) or grown since is kept, and listed to upload again.
    #[test]
    fn only_a_last_upload_lets_the_local_copy_go() {
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str, text: &str| {
            let f = dir.path().join(name);
            std::fs::write(&f, text).unwrap();
            f
        };
        let ended = file("ended.cast", "abc");
        mark(&ended, 3, true);
        let live = file("live.cast", "abcd");
        mark(&live, 4, false);
        let grown = file("grown.cast", "abcdef");
        mark(&grown, 3, true);
        let never = file("never.cast", "ab");
        let found = spooled(dir.path(), Some(Duration::ZERO));
        let mut names: Vec<String> = found
            .iter()
            .map(|(f, _, _)| f.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["grown.cast", "never.cast"]);
        assert!(!ended.exists() && !marker(&ended).exists());
        assert!(live.exists() && grown.exists() && never.exists());
    }

    /// A marker is never written through a link left in the spool.
    #[test]
    fn markers_do_not_follow_links() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let cast = dir.path().join("s.cast");
        std::os::unix::fs::symlink(&victim, marker(&cast)).unwrap();
        assert!(write_new(&marker(&cast), "x").is_err());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    }
}
