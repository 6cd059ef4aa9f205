"""The fault suite: real processes under kills, outages and flaky receivers (docs/reliability.md).

Every test here is marked `fault`; the long ones are also marked `slow` and run only with
`--run-slow` (`make faults` runs them all; `make test` runs the fast ones).
"""
