"""Suite-wide test settings."""

from hypothesis import HealthCheck, settings

# Property tests check invariants, not speed: a slow CI machine must not turn a first example's
# warm-up (pydantic schema building, imports) into a DeadlineExceeded failure. Timing targets live
# in benchmarks/.
settings.register_profile(
    "loom", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.load_profile("loom")
