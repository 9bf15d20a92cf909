//! The bounded request queue and continuous batching, as text-embeddings-inference forms
//! batches: requests wait here; whenever the engine is free it takes what waits, in arrival
//! order, up to a number of queries and of query tokens, and scores it as one batch. There is
//! no timer unless `max_delay` is set. A request whose client has gone (its answer channel
//! closed: timed out or disconnected) is dropped when its batch is formed.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tilemaxsim::Hit;
use tokio::sync::oneshot;

use super::api::Query;
use super::error::ApiError;
use super::metrics::Metrics;

/// A request's answer: per query its hits (best first), and how long it waited and took.
pub struct Answer {
    pub hits: Vec<Vec<Hit>>,
    pub queue: Duration,
    pub compute: Duration,
    pub batch_queries: usize,
    /// What names the hits' documents, where the engine says (an index served live, whose
    /// numbering a compaction changes); else what is loaded when the answer is read.
    pub loaded: Option<std::sync::Arc<super::ready::Loaded>>,
}

/// One request in the queue.
pub struct Job {
    pub queries: Vec<Query>,
    pub k: usize,
    /// Each query's documents, where the request searches within given ones.
    pub subset: Option<Vec<Vec<usize>>>,
    pub tokens: usize,
    pub enqueued: Instant,
    pub reply: oneshot::Sender<Result<Answer, ApiError>>,
}

/// How batches are formed and how much may wait.
#[derive(Clone, Copy, Debug)]
pub struct BatchLimits {
    /// Requests that may wait (beyond it: 429).
    pub max_queue: usize,
    pub max_queries: usize,
    pub max_tokens: usize,
    /// Wait up to this long after the oldest request for a batch to fill; `None`: never wait.
    pub max_delay: Option<Duration>,
}

#[derive(Default)]
struct State {
    jobs: VecDeque<Job>,
    closed: bool,
    /// The engine is asked to look at its index's updates now, with no request waiting.
    woken: bool,
}

pub struct Queue {
    state: Mutex<State>,
    arrived: Condvar,
    limits: BatchLimits,
    metrics: Arc<Metrics>,
}

impl Queue {
    pub fn new(limits: BatchLimits, metrics: Arc<Metrics>) -> Self {
        Queue {
            state: Mutex::new(State::default()),
            arrived: Condvar::new(),
            limits,
            metrics,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves a queue of plain values, still consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Enqueue a request; 429 when `max_queue` requests wait already, 503 once closed.
    pub fn push(&self, job: Job) -> Result<(), ApiError> {
        let mut s = self.lock();
        if s.closed {
            return Err(ApiError::Unavailable("the server is shutting down".into()));
        }
        if s.jobs.len() >= self.limits.max_queue {
            // Requests whose clients have gone hold no place.
            let before = s.jobs.len();
            s.jobs.retain(|j| !j.reply.is_closed());
            self.metrics
                .dropped_queued
                .inc_by((before - s.jobs.len()) as u64);
            if s.jobs.len() >= self.limits.max_queue {
                return Err(ApiError::QueueFull(s.jobs.len()));
            }
        }
        s.jobs.push_back(job);
        self.metrics.queue_depth.set(s.jobs.len() as i64);
        drop(s);
        self.arrived.notify_one();
        Ok(())
    }

    /// Hand the engine an empty batch if it waits for requests: an index served live then takes
    /// the update just written without waiting for a search.
    pub fn wake(&self) {
        self.lock().woken = true;
        self.arrived.notify_one();
    }

    /// Stop taking requests; `next_batch` hands out what waits, then `None`.
    pub fn close(&self) {
        self.lock().closed = true;
        self.arrived.notify_all();
    }

    /// Whether the jobs waiting fill a batch by themselves.
    fn full(&self, jobs: &VecDeque<Job>) -> bool {
        let (q, t) = jobs
            .iter()
            .fold((0, 0), |(q, t), j| (q + j.queries.len(), t + j.tokens));
        q >= self.limits.max_queries || t >= self.limits.max_tokens
    }

    /// The next batch: blocks until a request waits, then takes requests in arrival order
    /// while they fit the limits (the first always fits: requests are checked against them).
    /// `None` once the queue is closed and empty; an empty batch after [`Queue::wake`].
    pub fn next_batch(&self) -> Option<Vec<Job>> {
        self.next_batch_idle(None)
    }

    /// [`Queue::next_batch`], and an empty batch once no request has come for `idle` (an index
    /// served live looks at its log that often).
    pub fn next_batch_idle(&self, idle: Option<Duration>) -> Option<Vec<Job>> {
        let mut s = self.lock();
        loop {
            while s.jobs.is_empty() && !s.closed && !s.woken {
                match idle {
                    None => s = self.arrived.wait(s).unwrap_or_else(|p| p.into_inner()),
                    Some(idle) => {
                        let (g, waited) = self
                            .arrived
                            .wait_timeout(s, idle)
                            .unwrap_or_else(|p| p.into_inner());
                        s = g;
                        if waited.timed_out() && s.jobs.is_empty() && !s.closed {
                            return Some(Vec::new());
                        }
                    }
                }
            }
            if std::mem::take(&mut s.woken) && s.jobs.is_empty() && !s.closed {
                return Some(Vec::new());
            }
            // Drop the requests whose clients have gone before deciding anything on them.
            let before = s.jobs.len();
            s.jobs.retain(|j| !j.reply.is_closed());
            self.metrics
                .dropped_queued
                .inc_by((before - s.jobs.len()) as u64);
            if s.jobs.is_empty() {
                self.metrics.queue_depth.set(0);
                if s.closed {
                    return None;
                }
                continue;
            }
            if let Some(delay) = self.limits.max_delay
                && !s.closed
                && !self.full(&s.jobs)
            {
                let deadline = s.jobs[0].enqueued + delay;
                let now = Instant::now();
                if now < deadline {
                    s = self
                        .arrived
                        .wait_timeout(s, deadline - now)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                    continue;
                }
            }
            break;
        }
        let (mut queries, mut tokens) = (0, 0);
        let mut batch = Vec::new();
        while let Some(j) = s.jobs.front() {
            let fits = queries + j.queries.len() <= self.limits.max_queries
                && tokens + j.tokens <= self.limits.max_tokens;
            if !batch.is_empty() && !fits {
                break;
            }
            queries += j.queries.len();
            tokens += j.tokens;
            batch.extend(s.jobs.pop_front());
        }
        self.metrics.queue_depth.set(s.jobs.len() as i64);
        Some(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::api::{Limits, parse};

    fn job(
        queries: usize,
        tokens_each: usize,
    ) -> (Job, oneshot::Receiver<Result<Answer, ApiError>>) {
        let row = "[1, 0]";
        let q = format!(
            r#"{{"embeddings": [{}]}}"#,
            vec![row; tokens_each].join(",")
        );
        let body = format!(r#"{{"queries": [{}], "k": 1}}"#, vec![q; queries].join(","));
        let limits = Limits {
            dim: 2,
            documents: 3,
            max_k: 3,
            max_queries: 100,
            max_tokens: 1000,
            index: false,
        };
        let c = parse(body.as_bytes(), &limits).unwrap();
        let (tx, rx) = oneshot::channel();
        let j = Job {
            queries: c.queries,
            k: c.k,
            subset: c.subset,
            tokens: c.tokens,
            enqueued: Instant::now(),
            reply: tx,
        };
        (j, rx)
    }

    fn queue(max_queue: usize, max_queries: usize, max_tokens: usize) -> Queue {
        Queue::new(
            BatchLimits {
                max_queue,
                max_queries,
                max_tokens,
                max_delay: None,
            },
            Arc::new(Metrics::new()),
        )
    }

    #[test]
    fn batches_take_what_waits_in_order_up_to_the_limits() {
        let q = queue(10, 4, 100);
        let mut rxs = Vec::new();
        for n in [1, 2, 2, 1] {
            let (j, rx) = job(n, 3);
            q.push(j).unwrap();
            rxs.push(rx);
        }
        let sizes = |b: Vec<Job>| b.iter().map(|j| j.queries.len()).collect::<Vec<_>>();
        // 1 + 2 fit in 4; the next 2 would not, and order is kept (no skipping ahead).
        assert_eq!(sizes(q.next_batch().unwrap()), vec![1, 2]);
        assert_eq!(sizes(q.next_batch().unwrap()), vec![2, 1]);
        // Token limit: 3 tokens each, at most 7 tokens a batch.
        let q = queue(10, 100, 7);
        for _ in 0..3 {
            let (j, rx) = job(1, 3);
            q.push(j).unwrap();
            rxs.push(rx);
        }
        assert_eq!(q.next_batch().unwrap().len(), 2);
        assert_eq!(q.next_batch().unwrap().len(), 1);
    }

    #[test]
    fn a_wake_hands_the_waiting_engine_an_empty_batch_once() {
        let q = queue(10, 4, 100);
        q.wake();
        assert_eq!(q.next_batch().unwrap().len(), 0);
        // With a request waiting, the wake is taken by its batch.
        q.wake();
        let (j, _rx) = job(1, 1);
        q.push(j).unwrap();
        assert_eq!(q.next_batch().unwrap().len(), 1);
        // Idle for a while: an empty batch.
        assert_eq!(
            q.next_batch_idle(Some(Duration::from_millis(5)))
                .unwrap()
                .len(),
            0
        );
        q.close();
        assert!(q.next_batch().is_none());
    }

    #[test]
    fn a_full_queue_refuses_and_a_gone_client_is_dropped() {
        let q = queue(2, 8, 100);
        let (a, rx_a) = job(1, 1);
        let (b, rx_b) = job(1, 1);
        let (c, _rx_c) = job(1, 1);
        q.push(a).unwrap();
        q.push(b).unwrap();
        assert!(matches!(q.push(c), Err(ApiError::QueueFull(2))));
        drop(rx_a);
        let batch = q.next_batch().unwrap();
        assert_eq!(batch.len(), 1);
        assert_eq!(q.metrics.dropped_queued.get(), 1);
        // A gone client's place is freed for a new request.
        let (d, rx_d) = job(1, 1);
        let (e, _rx_e) = job(1, 1);
        let (g, _rx_g) = job(1, 1);
        q.push(d).unwrap();
        q.push(e).unwrap();
        assert!(matches!(q.push(g), Err(ApiError::QueueFull(2))));
        drop(rx_d);
        let (f, _rx_f) = job(1, 1);
        q.push(f).unwrap();
        assert_eq!(q.metrics.dropped_queued.get(), 2);
        assert_eq!(q.next_batch().unwrap().len(), 2);
        drop(rx_b);
        q.close();
        assert!(q.next_batch().is_none());
    }

    #[test]
    fn max_delay_waits_for_a_batch_to_fill() {
        let q = Arc::new(Queue::new(
            BatchLimits {
                max_queue: 10,
                max_queries: 2,
                max_tokens: 100,
                max_delay: Some(Duration::from_secs(10)),
            },
            Arc::new(Metrics::new()),
        ));
        let (a, _rx_a) = job(1, 1);
        q.push(a).unwrap();
        let q2 = Arc::clone(&q);
        let t = std::thread::spawn(move || q2.next_batch().map(|b| b.len()));
        std::thread::sleep(Duration::from_millis(100));
        let (b, _rx_b) = job(1, 1);
        q.push(b).unwrap();
        // The batch waited for the second request (it would otherwise have left alone).
        assert_eq!(t.join().unwrap(), Some(2));
    }
}
