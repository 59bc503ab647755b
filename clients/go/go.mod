module github.com/gym-metrics/gym-metrics/clients/go

go 1.19
