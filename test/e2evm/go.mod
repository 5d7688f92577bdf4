module github.com/corepin/corepin/test/e2evm

go 1.26.0
