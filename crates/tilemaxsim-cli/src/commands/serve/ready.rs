//! What the server answers with, shared by the engines (`engine.rs`, `live.rs`) and the router:
//! [`Ready`] (the current [`Loaded`] state and how much of an index's updates it covers),
//! [`Loaded`] (what `/v1/info` reports and requests are checked against) and [`Names`] (what
//! names the documents in hits).

use std::sync::{Arc, RwLock};

use tilemaxsim::index::Stamp;

/// What the server answers with: set once the corpus is loaded, replaced when an index served
/// live takes updates or a new generation. A search's hits are named by the state that served
/// its batch (`queue::Answer::loaded`), since a compaction numbers the documents again.
pub struct Ready {
    loaded: RwLock<Option<Arc<Loaded>>>,
    /// How much of an index the loaded searcher covers: its generation, and the bytes of that
    /// generation's update log.
    pub(super) applied: tokio::sync::watch::Sender<Stamp>,
}

impl Default for Ready {
    fn default() -> Self {
        Ready {
            loaded: RwLock::default(),
            applied: tokio::sync::watch::Sender::new(Stamp::default()),
        }
    }
}

impl Ready {
    pub fn get(&self) -> Option<Arc<Loaded>> {
        self.loaded
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
    pub(super) fn set(&self, loaded: Loaded) -> Arc<Loaded> {
        let loaded = Arc::new(loaded);
        *self.loaded.write().unwrap_or_else(|e| e.into_inner()) = Some(loaded.clone());
        loaded
    }

    /// Wait until the searcher serving covers the index up to `stamp`.
    pub async fn applied(&self, stamp: Stamp) {
        let mut rx = self.applied.subscribe();
        // An error: the engine stopped, and the caller's answer says so no more than this.
        let _ = rx.wait_for(|&n| n >= stamp).await;
    }
}

/// What `/v1/info` reports and requests are checked against, known once the corpus is loaded.
pub struct Loaded {
    pub dim: usize,
    pub documents: usize,
    pub tokens: usize,
    pub dtype: String,
    pub engine: String,
    pub devices: Vec<String>,
    pub names: Names,
    /// An index's generation (`None`: a corpus).
    pub generation: Option<u64>,
}

/// What names the documents in hits: the corpus's (or the index build's) ids, shared by every
/// [`Loaded`] of a server, then an index's added documents' ids; a document without one is
/// named by its number.
pub struct Names {
    /// Ids from the file or `--doc-ids`; `None`: hits name these documents by number.
    pub ids: Option<Arc<[String]>>,
    /// Documents numbered before the added ones.
    pub first: usize,
    /// The added documents' names, numbered from `first`.
    pub added: Vec<String>,
}

impl Names {
    pub fn doc(&self, j: usize) -> String {
        let name = match j.checked_sub(self.first) {
            None => self.ids.as_ref().and_then(|ids| ids.get(j)),
            Some(a) => self.added.get(a),
        };
        name.cloned().unwrap_or_else(|| j.to_string())
    }

    pub fn has_ids(&self) -> bool {
        self.ids.is_some()
    }
}
