//! The signature checks behind `jsonwebtoken`, on `ring`.
//!
//! `jsonwebtoken` leaves its cryptography to a process-wide provider; its own two need
//! aws-lc (a C library built with cmake) or `RustCrypto`'s `rsa`. `ring` is already here for
//! rustls, so this provider verifies with it. It only verifies: the gateway never signs a
//! token, and it never accepts a shared-secret (`HS*`) signature, so those fail here too, as a
//! last line behind the configuration and the key-type checks.

use jsonwebtoken::crypto::{CryptoProvider, JwtSigner, JwtVerifier, KeyUtils};
use jsonwebtoken::errors::{Error as JwtError, ErrorKind};
use jsonwebtoken::jwk::{EllipticCurve, ThumbprintHash};
use jsonwebtoken::signature::{self, Verifier};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, DecodingKeyKind, EncodingKey};
use ring::signature as ring_sig;

/// Install the provider once per process. Another part of the process may have installed
/// one first (none does today); verifying with it is as correct, so that is fine.
pub(super) fn install() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let _ = PROVIDER.install_default();
    });
}

static PROVIDER: CryptoProvider = CryptoProvider {
    signer_factory: no_signer,
    verifier_factory: verifier,
    key_utils: KeyUtils {
        rsa_pub_components_from_private_key: |_| Err(unsupported()),
        rsa_pub_components_from_public_key: |_| Err(unsupported()),
        ec_pub_components_from_private_key: |_, _| Err(unsupported()),
        ed_pub_components_from_private_key: no_ed_components,
        compute_digest: digest,
    },
};

fn unsupported() -> JwtError {
    ErrorKind::UnsupportedAlgorithm.into()
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "the signature `CryptoProvider` asks for"
)]
fn no_signer(_: &Algorithm, _: &EncodingKey) -> Result<Box<dyn JwtSigner>, JwtError> {
    Err(unsupported())
}

fn no_ed_components(_: &[u8], _: &EllipticCurve) -> Result<Vec<u8>, JwtError> {
    Err(unsupported())
}

#[expect(clippy::needless_pass_by_value, reason = "the signature `KeyUtils` asks for")]
fn digest(data: &[u8], hash: ThumbprintHash) -> Result<Vec<u8>, JwtError> {
    let algorithm = match hash {
        ThumbprintHash::SHA256 => &ring::digest::SHA256,
        ThumbprintHash::SHA384 => &ring::digest::SHA384,
        ThumbprintHash::SHA512 => &ring::digest::SHA512,
        _ => return Err(unsupported()),
    };
    Ok(ring::digest::digest(algorithm, data).as_ref().to_vec())
}

/// The check of one algorithm. RSA keys below 2048 bits are refused by `ring`'s parameters.
#[derive(Clone, Copy)]
enum Check {
    Rsa(&'static ring_sig::RsaParameters),
    /// ECDSA (fixed-size `r‖s`, as JWS writes it) and Ed25519 over the raw public key.
    Raw(&'static dyn ring_sig::VerificationAlgorithm),
}

fn check_for(algorithm: Algorithm) -> Option<(Check, AlgorithmFamily)> {
    use AlgorithmFamily::{Ec, Ed, Rsa};
    Some(match algorithm {
        Algorithm::RS256 => (Check::Rsa(&ring_sig::RSA_PKCS1_2048_8192_SHA256), Rsa),
        Algorithm::RS384 => (Check::Rsa(&ring_sig::RSA_PKCS1_2048_8192_SHA384), Rsa),
        Algorithm::RS512 => (Check::Rsa(&ring_sig::RSA_PKCS1_2048_8192_SHA512), Rsa),
        Algorithm::PS256 => (Check::Rsa(&ring_sig::RSA_PSS_2048_8192_SHA256), Rsa),
        Algorithm::PS384 => (Check::Rsa(&ring_sig::RSA_PSS_2048_8192_SHA384), Rsa),
        Algorithm::PS512 => (Check::Rsa(&ring_sig::RSA_PSS_2048_8192_SHA512), Rsa),
        Algorithm::ES256 => (Check::Raw(&ring_sig::ECDSA_P256_SHA256_FIXED), Ec),
        Algorithm::ES384 => (Check::Raw(&ring_sig::ECDSA_P384_SHA384_FIXED), Ec),
        Algorithm::EdDSA => (Check::Raw(&ring_sig::ED25519), Ed),
        // HS* and whatever a later version adds: never verified here.
        _ => return None,
    })
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "the signature `CryptoProvider` asks for"
)]
fn verifier(algorithm: &Algorithm, key: &DecodingKey) -> Result<Box<dyn JwtVerifier>, JwtError> {
    let (check, family) = check_for(*algorithm).ok_or_else(unsupported)?;
    if key.family() != family {
        return Err(ErrorKind::InvalidKeyFormat.into());
    }
    Ok(Box::new(RingVerifier {
        algorithm: *algorithm,
        check,
        key: key.clone(),
    }))
}

struct RingVerifier {
    algorithm: Algorithm,
    check: Check,
    key: DecodingKey,
}

impl Verifier<Vec<u8>> for RingVerifier {
    fn verify(&self, message: &[u8], signature: &Vec<u8>) -> Result<(), signature::Error> {
        let verified = match (self.check, self.key.kind()) {
            (Check::Rsa(params), DecodingKeyKind::RsaModulusExponent { n, e }) => {
                ring_sig::RsaPublicKeyComponents { n, e }.verify(params, message, signature)
            }
            (Check::Rsa(params), DecodingKeyKind::SecretOrDer(der)) => {
                ring_sig::UnparsedPublicKey::new(params, der).verify(message, signature)
            }
            (Check::Raw(algorithm), DecodingKeyKind::SecretOrDer(bytes)) => {
                ring_sig::UnparsedPublicKey::new(algorithm, bytes).verify(message, signature)
            }
            (Check::Raw(_), DecodingKeyKind::RsaModulusExponent { .. }) => Err(ring::error::Unspecified),
        };
        verified.map_err(|_| signature::Error::new())
    }
}

impl JwtVerifier for RingVerifier {
    fn algorithm(&self) -> Algorithm {
        self.algorithm
    }
}
