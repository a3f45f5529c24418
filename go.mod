module github.com/dshfs/dshfs

go 1.26.8

require (
	github.com/zeebo/blake3 v0.2.4
	go.etcd.io/bbolt v1.5.0
)

require (
	github.com/klauspost/cpuid/v2 v2.0.12 // indirect
	golang.org/x/sys v0.45.0 // indirect
)
