//! The team face: the gateway served over HTTP.
//!
//! `auth` makes the HTTP face an OAuth 2.1 resource server: it checks each request's access
//! token and hands the rest of the face the [`Caller`](crate::caller::Caller) it proved.

pub mod auth;
