//! A new socket's authentication in a scan's shared wait
//! ([`super::overlap`]): the conversation begins on the handshake's reply,
//! and each command it asks for goes back into the wait, so the members a
//! scan connects to authenticate side by side, as their hellos went (N
//! members cost the round trips of one, not N times as many).
//!
//! ```text
//!  hello reply ─> begin ─> Send ─> wait: command sent, reply awaited ─> step ─> Send ... ─> Done
//!                   └─> Fetch (AWS/OIDC secrets): fetched inline, then on        └─> socket seated,
//!                                                                                    check applied
//! ```
//!
//! The blocking check (Unix sockets, a load balancer, no poller) keeps the
//! conversation loop of [`super::checks`].

use std::time::Instant;

use bson::Document;

use super::checks::{stored_keys_refused, CheckEnd};
use super::overlap::{self, Authenticating, Checked, Finished};
use super::Topology;
use crate::error::Error;
use crate::proto::auth::{Authenticator, Next, Speculation};
use crate::shell::conn::Connection;

/// Where a check stands once a finished wait's result is taken in.
pub(super) enum Progress {
    /// The check is over: the handshake's (or hello's) reply, or why not.
    Done(CheckEnd),
    /// An authentication command is on its way: the check goes on in the
    /// wait.
    Waiting,
}

/// When a check started, and the limit it must end by.
type CheckTimes = (Instant, Option<Instant>);

impl Topology {
    /// A new socket's hello reply came in the shared wait: the reply is
    /// applied and the conversation begins; a command it asks for goes
    /// back into the wait.
    pub(super) fn handshake_replied(
        &mut self,
        mut connection: Connection,
        reply: Document,
        speculation: Speculation,
        times: CheckTimes,
    ) -> Progress {
        let reply = match self.accept_handshake_reply(&mut connection, reply) {
            Ok(reply) => reply,
            Err(error) => return Progress::Done(CheckEnd::Failed(error)),
        };
        // The auth spec: authenticate right after the handshake, before the
        // socket carries anything else.
        let Some(mut authenticator) = self.authenticator.take() else {
            return Progress::Done(CheckEnd::from_result(
                self.seat_connection(connection, reply),
            ));
        };
        let progress =
            self.begin_conversation(&mut authenticator, connection, (reply, speculation), times);
        self.authenticator = Some(authenticator);
        progress
    }

    /// The reply to one of a new socket's authentication commands came:
    /// the conversation takes its next step. Keys from the state file
    /// that the server refused are dropped and the socket starts over
    /// once, with PBKDF2, as in the blocking loop ([`super::checks`]).
    pub(super) fn auth_replied(
        &mut self,
        connection: Connection,
        mut auth: Box<Authenticating>,
        answer: Document,
        times: CheckTimes,
    ) -> Progress {
        let Some(mut authenticator) = self.authenticator.take() else {
            return Progress::Done(CheckEnd::Failed(Error::client(
                "an authentication went on without the client's credential",
            )));
        };
        let progress = match authenticator.step(&mut auth.conversation, &answer) {
            Ok(next) => self.advance(&mut authenticator, connection, auth, next, times),
            Err(error) => {
                authenticator.conversation_failed(&auth.conversation);
                if stored_keys_refused(&mut authenticator, &error, &auth.conversation) {
                    let Authenticating { hello, .. } = *auth;
                    let start_over = (hello, Speculation::None);
                    self.begin_conversation(&mut authenticator, connection, start_over, times)
                } else {
                    let failed = CheckEnd::Unauthenticated {
                        hello: auth.hello,
                        error,
                    };
                    self.conversation_ended(&mut authenticator, Err(failed))
                }
            }
        };
        self.authenticator = Some(authenticator);
        progress
    }

    /// A conversation failed on the way (its socket, or the check's
    /// limit): what the failure invalidates is cleared, as the blocking
    /// loop does.
    pub(super) fn auth_failed(&mut self, auth: Box<Authenticating>, error: Error) -> Progress {
        let Some(mut authenticator) = self.authenticator.take() else {
            return Progress::Done(CheckEnd::Failed(error));
        };
        authenticator.conversation_failed(&auth.conversation);
        let failed = CheckEnd::Unauthenticated {
            hello: auth.hello,
            error,
        };
        let progress = self.conversation_ended(&mut authenticator, Err(failed));
        self.authenticator = Some(authenticator);
        progress
    }

    /// Begins a conversation on the handshake's reply (`hello`), with
    /// what the handshake speculated.
    fn begin_conversation(
        &mut self,
        authenticator: &mut Authenticator,
        connection: Connection,
        (hello, speculation): (Document, Speculation),
        times: CheckTimes,
    ) -> Progress {
        let begun = crate::shell::rng::client_nonce()
            .and_then(|nonce| authenticator.begin(&hello, speculation, &nonce));
        match begun {
            Ok((conversation, next)) => {
                let auth = Box::new(Authenticating {
                    conversation,
                    hello,
                });
                self.advance(authenticator, connection, auth, next, times)
            }
            Err(error) => {
                let failed = CheckEnd::Unauthenticated { hello, error };
                self.conversation_ended(authenticator, Err(failed))
            }
        }
    }

    /// A conversation is over: the state file hears what its outcome
    /// changed (keys accepted and sealed, or refused and dropped), and the
    /// check is done, with the socket seated when it succeeded.
    fn conversation_ended(
        &mut self,
        authenticator: &mut Authenticator,
        outcome: Result<(Connection, Authenticating), CheckEnd>,
    ) -> Progress {
        match outcome {
            Ok((connection, auth)) => {
                self.update_state_file(authenticator, Some(&auth.conversation));
                Progress::Done(CheckEnd::from_result(
                    self.seat_connection(connection, auth.hello),
                ))
            }
            Err(failed) => {
                self.update_state_file(authenticator, None);
                Progress::Done(failed)
            }
        }
    }

    /// Moves a conversation on: secrets it waits for are fetched inline, a
    /// command goes into the wait, and once done the socket takes its slot.
    fn advance(
        &mut self,
        authenticator: &mut Authenticator,
        connection: Connection,
        mut auth: Box<Authenticating>,
        mut next: Next,
        (started, limit): CheckTimes,
    ) -> Progress {
        loop {
            match next {
                Next::Done => {
                    return self.conversation_ended(authenticator, Ok((connection, *auth)))
                }
                Next::Fetch(need) => {
                    let time_left = overlap::time_left(limit, self.clock.now());
                    let provided = self
                        .fetch_secret(authenticator, need, time_left)
                        .and_then(|secret| authenticator.provide(&mut auth.conversation, secret));
                    match provided {
                        Ok(following) => next = following,
                        Err(error) => {
                            authenticator.conversation_failed(&auth.conversation);
                            let failed = CheckEnd::Unauthenticated {
                                hello: auth.hello,
                                error,
                            };
                            return self.conversation_ended(authenticator, Err(failed));
                        }
                    }
                }
                Next::Send { db, command } => {
                    let Some(overlap) = self.overlap.as_mut() else {
                        let error = Error::client(
                            "a new socket authenticates in the scan's wait, and there is none",
                        );
                        return self
                            .conversation_ended(authenticator, Err(CheckEnd::Failed(error)));
                    };
                    let sent =
                        overlap.continue_auth(connection, (&db, command), auth, (started, limit));
                    return match sent {
                        Ok(()) => Progress::Waiting,
                        Err(finished) => self.not_sent(authenticator, *finished),
                    };
                }
            }
        }
    }

    /// A command of the conversation could not be sent.
    fn not_sent(&mut self, authenticator: &mut Authenticator, finished: Finished) -> Progress {
        let failed = match finished.result {
            Ok(Checked::AuthFailed(auth, error)) => {
                authenticator.conversation_failed(&auth.conversation);
                CheckEnd::Unauthenticated {
                    hello: auth.hello,
                    error,
                }
            }
            Err(error) => CheckEnd::Failed(error),
            Ok(_) => CheckEnd::Failed(Error::client(
                "an authentication command was neither sent nor refused",
            )),
        };
        self.conversation_ended(authenticator, Err(failed))
    }
}
