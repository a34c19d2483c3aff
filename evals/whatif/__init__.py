"""What-if: recorded requests replayed through each provider's cache family (`projection.caching`) and prices."""
