//! The Redis store: one connection manager (connected on first use, reconnected by the
//! driver with backoff), Lua scripts where a read and a write must be one step (versioned
//! writes, lock release, token buckets), and a subscriber task per channel that reconnects
//! on its own and says so, so its owner reads everything again.
//!
//! Every command has a short deadline: a store that stopped answering turns into an error
//! within seconds, never a call or a search waiting on it.

use std::sync::OnceLock;
use std::time::Duration;

use futures::StreamExt;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{AsyncCommands, Script};
use tokio::sync::mpsc;

use super::Delivery;

/// How long connecting may take, and one command's answer.
const DEADLINE: Duration = Duration::from_secs(2);
/// Wait between two attempts of the subscriber to reconnect.
const RESUBSCRIBE_EVERY: Duration = Duration::from_secs(1);

const PUT_VERSIONED: &str = r"
local current = redis.call('HGET', KEYS[1], 'v')
if current and tonumber(current) >= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[1], 'd', ARGV[2])
return 1";

const DELETE_IF: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0";

/// A token bucket on the server's clock (replicas' clocks may differ): refill, take one if
/// there is one, else answer the milliseconds until there is.
const TAKE_TOKEN: &str = r"
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local held = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(held[1])
local at = tonumber(held[2])
if tokens == nil or at == nil then tokens = burst; at = now end
tokens = math.min(burst, tokens + math.max(0, now - at) * rate / 1000)
local wait = 0
if tokens >= 1 then tokens = tokens - 1 else wait = math.ceil((1 - tokens) * 1000 / rate) end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return wait";

pub struct Remote {
    client: redis::Client,
    manager: OnceLock<ConnectionManager>,
    put_versioned: Script,
    delete_if: Script,
    take_token: Script,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL holds the password.
        f.write_str("Remote")
    }
}

impl Remote {
    pub fn new(url: &str) -> redis::RedisResult<Self> {
        // `rediss://`: rustls needs a process-wide provider; ring is the one already here.
        let _ = rustls::crypto::ring::default_provider().install_default();
        Ok(Self {
            client: redis::Client::open(url)?,
            manager: OnceLock::new(),
            put_versioned: Script::new(PUT_VERSIONED),
            delete_if: Script::new(DELETE_IF),
            take_token: Script::new(TAKE_TOKEN),
        })
    }

    /// The connection: made on first use (needs the tokio runtime), connected lazily.
    fn connection(&self) -> redis::RedisResult<ConnectionManager> {
        if let Some(manager) = self.manager.get() {
            return Ok(manager.clone());
        }
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(DEADLINE))
            .set_response_timeout(Some(DEADLINE))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_secs(1));
        let manager = ConnectionManager::new_lazy_with_config(self.client.clone(), config)?;
        Ok(self.manager.get_or_init(|| manager).clone())
    }

    pub async fn get(&self, key: &str) -> redis::RedisResult<Option<Vec<u8>>> {
        self.connection()?.get(key).await
    }

    pub async fn set(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> redis::RedisResult<()> {
        let mut connection = self.connection()?;
        match ttl {
            Some(ttl) => connection.pset_ex(key, value, millis(ttl)).await,
            None => connection.set(key, value).await,
        }
    }

    pub async fn set_nx(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> redis::RedisResult<bool> {
        let mut command = redis::cmd("SET");
        command.arg(key).arg(value).arg("NX");
        if let Some(ttl) = ttl {
            command.arg("PX").arg(millis(ttl));
        }
        let answer: Option<String> = command.query_async(&mut self.connection()?).await?;
        Ok(answer.is_some())
    }

    pub async fn take(&self, key: &str) -> redis::RedisResult<Option<Vec<u8>>> {
        self.connection()?.get_del(key).await
    }

    pub async fn delete(&self, key: &str) -> redis::RedisResult<()> {
        self.connection()?.del(key).await
    }

    pub async fn delete_if(&self, key: &str, value: &[u8]) -> redis::RedisResult<bool> {
        let deleted: i64 = self
            .delete_if
            .key(key)
            .arg(value)
            .invoke_async(&mut self.connection()?)
            .await?;
        Ok(deleted > 0)
    }

    pub async fn put_versioned(&self, key: &str, version: u64, value: &[u8]) -> redis::RedisResult<bool> {
        let written: i64 = self
            .put_versioned
            .key(key)
            .arg(version)
            .arg(value)
            .invoke_async(&mut self.connection()?)
            .await?;
        Ok(written == 1)
    }

    pub async fn get_versioned(&self, keys: &[String]) -> redis::RedisResult<Vec<Option<(u64, Vec<u8>)>>> {
        if keys.is_empty() {
            // Nothing to read, but the caller learns whether the store answers.
            let _: String = redis::cmd("PING").query_async(&mut self.connection()?).await?;
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for key in keys {
            pipe.cmd("HMGET").arg(key).arg("v").arg("d");
        }
        let answers: Vec<(Option<u64>, Option<Vec<u8>>)> = pipe.query_async(&mut self.connection()?).await?;
        Ok(answers.into_iter().map(|(version, data)| version.zip(data)).collect())
    }

    pub async fn hget_many(&self, hash: &str, fields: &[Vec<u8>]) -> redis::RedisResult<Vec<Option<Vec<u8>>>> {
        if fields.is_empty() {
            return Ok(Vec::new());
        }
        redis::cmd("HMGET")
            .arg(hash)
            .arg(fields)
            .query_async(&mut self.connection()?)
            .await
    }

    pub async fn hset_many(&self, hash: &str, pairs: &[(Vec<u8>, Vec<u8>)]) -> redis::RedisResult<()> {
        if pairs.is_empty() {
            return Ok(());
        }
        self.connection()?.hset_multiple(hash, pairs).await
    }

    pub async fn hset_nx_many(&self, hash: &str, pairs: &[(Vec<u8>, Vec<u8>)]) -> redis::RedisResult<()> {
        if pairs.is_empty() {
            return Ok(());
        }
        let mut pipe = redis::pipe();
        for (field, value) in pairs {
            pipe.cmd("HSETNX").arg(hash).arg(field).arg(value).ignore();
        }
        pipe.query_async(&mut self.connection()?).await
    }

    pub async fn hget_all(&self, hashes: &[String]) -> redis::RedisResult<Vec<Vec<(Vec<u8>, Vec<u8>)>>> {
        if hashes.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for hash in hashes {
            pipe.cmd("HGETALL").arg(hash);
        }
        pipe.query_async(&mut self.connection()?).await
    }

    pub async fn take_token(
        &self,
        key: &str,
        per_second: f64,
        burst: u32,
        ttl: Duration,
    ) -> redis::RedisResult<Option<Duration>> {
        let wait_ms: u64 = self
            .take_token
            .key(key)
            .arg(per_second)
            .arg(burst)
            .arg(millis(ttl))
            .invoke_async(&mut self.connection()?)
            .await?;
        Ok((wait_ms > 0).then(|| Duration::from_millis(wait_ms)))
    }

    pub async fn publish(&self, channel: &str, payload: &[u8]) -> redis::RedisResult<()> {
        self.connection()?.publish(channel, payload).await
    }

    /// Messages of `channel` until the receiver is dropped; [`Delivery::Connected`] after
    /// every (re)subscription, [`Delivery::Lost`] when the connection drops.
    pub fn subscribe(&self, channel: &str) -> mpsc::Receiver<Delivery> {
        let (sender, delivered) = mpsc::channel(256);
        let client = self.client.clone();
        let channel = channel.to_owned();
        tokio::spawn(async move {
            while !sender.is_closed() {
                let why = match listen(&client, &channel, &sender).await {
                    Ok(()) => "the connection closed".to_owned(),
                    Err(error) => error.to_string(),
                };
                if sender.send(Delivery::Lost(why)).await.is_err() {
                    return;
                }
                tokio::time::sleep(RESUBSCRIBE_EVERY).await;
            }
        });
        delivered
    }
}

/// One subscription's life: subscribe, say so, pass messages on until the stream ends.
async fn listen(client: &redis::Client, channel: &str, sender: &mpsc::Sender<Delivery>) -> redis::RedisResult<()> {
    let mut pubsub = tokio::time::timeout(DEADLINE, client.get_async_pubsub())
        .await
        .map_err(|_| timed_out())??;
    tokio::time::timeout(DEADLINE, pubsub.subscribe(channel))
        .await
        .map_err(|_| timed_out())??;
    if sender.send(Delivery::Connected).await.is_err() {
        return Ok(());
    }
    let mut messages = pubsub.into_on_message();
    while let Some(message) = messages.next().await {
        if sender
            .send(Delivery::Message(message.get_payload_bytes().to_vec()))
            .await
            .is_err()
        {
            return Ok(());
        }
    }
    Ok(())
}

fn timed_out() -> redis::RedisError {
    redis::RedisError::from(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        "no answer within 2 s",
    ))
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX).max(1)
}
