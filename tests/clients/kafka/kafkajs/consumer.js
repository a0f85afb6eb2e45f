// A kafkajs consumer that prints what happens to it as JSON lines on stdout, for the tests and
// the benchmark: every assignment with its generation, and every message it consumed.
//
//   node consumer.js <bootstrap> <group> <topic> [client-id]
//
// Environment: SESSION_TIMEOUT_MS (default 10000), HEARTBEAT_INTERVAL_MS (default 1000),
// ASSIGNER (roundrobin, the default, or a name of the test's own: the group's protocol name).
'use strict'

const { Kafka, logLevel, PartitionAssigners } = require('kafkajs')

const [bootstrap, groupId, topic, clientId = 'kafkajs'] = process.argv.slice(2)
if (!bootstrap || !groupId || !topic) {
  console.error('usage: node consumer.js <bootstrap> <group> <topic> [client-id]')
  process.exit(2)
}

const emit = event => process.stdout.write(JSON.stringify({ at: Date.now() / 1000, ...event }) + '\n')

// kafkajs tells the generation of an assignment only in its debug log.
const logCreator = () => ({ namespace, level, log }) => {
  const { message, ...extra } = log
  if (message === 'Received assignment') {
    emit({ event: 'assigned', generation: extra.generationId, memberId: extra.memberId, assignment: extra.memberAssignment })
  } else if (level <= logLevel.WARN) {
    emit({ event: 'log', level, namespace, message, error: extra.error })
  }
}

// A custom name stands for an application that names its own assignor: the round-robin logic
// under another protocol name.
const assigner = process.env.ASSIGNER && process.env.ASSIGNER !== 'roundrobin'
  ? args => ({ ...PartitionAssigners.roundRobin(args), name: process.env.ASSIGNER })
  : PartitionAssigners.roundRobin

const kafka = new Kafka({ clientId, brokers: bootstrap.split(','), logLevel: logLevel.DEBUG, logCreator })
const consumer = kafka.consumer({
  groupId,
  sessionTimeout: Number(process.env.SESSION_TIMEOUT_MS || 10000),
  heartbeatInterval: Number(process.env.HEARTBEAT_INTERVAL_MS || 1000),
  rebalanceTimeout: Number(process.env.REBALANCE_TIMEOUT_MS || 30000),
  partitionAssigners: [assigner],
})

consumer.on(consumer.events.GROUP_JOIN, ({ payload }) =>
  emit({ event: 'joined', memberId: payload.memberId, leader: payload.isLeader, protocol: payload.groupProtocol }))
consumer.on(consumer.events.CRASH, ({ payload }) => emit({ event: 'crash', error: String(payload.error) }))

const main = async () => {
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  await consumer.run({
    eachMessage: async ({ partition, message }) => {
      emit({ event: 'message', partition, offset: Number(message.offset), key: message.key && message.key.toString() })
    },
  })
  emit({ event: 'running' })
}

let stopping = false
const stop = async () => {
  if (stopping) return
  stopping = true
  try {
    await consumer.disconnect()
  } finally {
    emit({ event: 'stopped' })
    process.exit(0)
  }
}
process.on('SIGTERM', stop)
process.on('SIGINT', stop)

main().catch(error => {
  emit({ event: 'crash', error: String(error) })
  process.exit(1)
})
