"""The HTTP side (litestar): the Go Hades API, the Log Manager routes, and our job views."""
